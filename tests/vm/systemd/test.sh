#!/bin/bash
# Runs inside the systemd test VM (vmsystemd-test.service, as root, once the
# system is up): rdmamemd installed by its Debian packages (dpkg -i here,
# first thing, when run.sh left them in /var/cache/vmsystemd/debs) or by
# `make install` with PREFIX=/usr, started through its own units by a real
# systemd. Prints one line per
# check, "vmsystemd: PASS: ..." or "vmsystemd: FAIL: ... (what was seen)",
# then "N passed, N failed" and "VMTEST-RESULT rc=N", and leaves the power-off
# to the unit (SuccessAction=poweroff).
#
# Users: alice is in group rdmamem (may use the socket), mallory is not.
set -u -o pipefail
export PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin LC_ALL=C.UTF-8

log_dir=/var/log/vmsystemd
work=/tmp/vmsystemd
mkdir -p "$log_dir" "$work"
chmod 1777 "$work"
conf=/etc/rdmamemd/rdmamemd.conf
sock=/run/rdmamemd/rdmamemd.sock
passed=0 failed=0

pass() {
	echo "vmsystemd: PASS: $1"
	passed=$((passed + 1))
}

# fail WHAT [SEEN]: SEEN is shown indented, at most 15 lines.
fail() {
	echo "vmsystemd: FAIL: $1"
	[ -z "${2-}" ] || printf '%s\n' "$2" | head -n 15 | sed 's/^/    | /'
	failed=$((failed + 1))
}

# expect WHAT COMMAND...: passes when COMMAND exits 0, else shows its output.
expect() {
	local what=$1 out
	shift
	if out=$("$@" 2>&1); then
		pass "$what"
	else
		fail "$what" "$out"
	fi
}

# is WHAT GOT WANT
is() {
	if [ "$2" = "$3" ]; then
		pass "$1 ($3)"
	else
		fail "$1" "got '$2', want '$3'"
	fi
}

# matches WHAT TEXT REGEX (grep -E)
matches() {
	if printf '%s\n' "$2" | grep -Eq -- "$3"; then
		pass "$1"
	else
		fail "$1" "no line matches /$3/ in:
$2"
	fi
}

# wait_until SECONDS COMMAND...: polls every 0.2 s.
wait_until() {
	local n=$(($1 * 5))
	shift
	while [ "$n" -gt 0 ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
		n=$((n - 1))
	done
	return 1
}

prop() {
	systemctl show "${2:-rdmamemd.service}" --value -p "$1"
}

# as USER COMMAND...: no PAM, no session: just the uid, gid and groups.
as() {
	local u=$1
	shift
	timeout 60 setpriv --reuid="$u" --regid="$u" --init-groups --reset-env -- "$@"
}

journal_since() {
	journalctl --no-pager -q --since "@$t_start" "$@"
}

# set_key SECTION KEY VALUE: in the installed configuration file, as an
# administrator would (the shipped file sets nothing: every key is a comment).
set_key() {
	if grep -qx "\[$1\]" "$conf" && ! grep -q "^$2 *=" "$conf"; then
		sed -i "/^\[$1\]\$/a $2 = $3" "$conf"
		rdmamemd --check-config >/dev/null 2>&1 ||
			fail "rdmamemd --check-config after setting $2 = $3" "$(rdmamemd --check-config 2>&1)"
	else
		fail "$conf: cannot set $2 in [$1]" "$(grep -n "^\[\|$2" "$conf")"
	fi
}

section() {
	echo "vmsystemd: --- $* (at $(cut -d' ' -f1 /proc/uptime)s uptime)"
}

t_start=$(date +%s)
section "guest: $(uname -r), $(systemctl --version | head -n 1)"

# --- the packages, when there are some ---------------------------------------
# What the maintainer scripts did alone, before this script runs sysusers,
# tmpfiles or systemctl itself: the user, the runtime directory, the socket
# enabled and listening, the service neither (the first client starts it).
debs=(/var/cache/vmsystemd/debs/*.deb)
[ -e "${debs[0]}" ] || debs=()
if [ ${#debs[@]} -gt 0 ]; then
	section "the packages: dpkg -i ${debs[*]##*/}"
	expect "dpkg -i ${debs[*]##*/}" timeout 120 dpkg -i "${debs[@]}"
	matches "postinst: user rdmamemd made by systemd-sysusers" "$(getent passwd rdmamemd)" "^rdmamemd:"
	is "postinst: /run/rdmamemd made by systemd-tmpfiles" \
		"$(stat -c '%a %U %G' /run/rdmamemd 2>&1)" "755 root rdmamem"
	is "postinst: rdmamemd.socket enabled" "$(systemctl is-enabled rdmamemd.socket 2>&1)" enabled
	is "postinst: rdmamemd.socket started" "$(systemctl is-active rdmamemd.socket 2>&1)" active
	is "postinst: rdmamemd.service not enabled" "$(systemctl is-enabled rdmamemd.service 2>&1)" disabled
	is "postinst: rdmamemd.service not started" "$(systemctl is-active rdmamemd.service 2>&1)" inactive
	matches "the unit is the package's" "$(systemctl show rdmamemd.service --value -p FragmentPath)" \
		"^(/usr)?/lib/systemd/system/rdmamemd\.service$"
fi

# --- users, runtime directory ----------------------------------------------
section "sysusers, tmpfiles, users"
expect "systemd-sysusers" systemd-sysusers
expect "systemd-tmpfiles --create rdmamemd.conf" systemd-tmpfiles --create rdmamemd.conf
pw=$(getent passwd rdmamemd)
matches "user rdmamemd exists with group rdmamem and no login shell" "$pw" \
	"^rdmamemd:x:[0-9]+:$(getent group rdmamem | cut -d: -f3):.*:(/usr/sbin/nologin|/sbin/nologin|/bin/false)?$"
is "/run/rdmamemd from tmpfiles" "$(stat -c '%a %U %G' /run/rdmamemd 2>&1)" "755 root rdmamem"
useradd -m -G rdmamem alice && useradd -m mallory ||
	fail "useradd alice (in rdmamem) and mallory (not)"
alice_uid=$(id -u alice)
rd_uid=$(id -u rdmamemd)
rd_gid=$(getent group rdmamem | cut -d: -f3)

# --- Soft-RoCE, so that the sandbox's DeviceAllow= lines meet a real device -
section "Soft-RoCE rxe0 on a veth pair"
rxe=no
if out=$({ modprobe crc32_generic && modprobe rdma_rxe && modprobe rdma_ucm &&
	ip link add veth0 type veth peer name veth1 &&
	ip addr add 10.9.0.1/24 dev veth0 && ip link set veth0 up && ip link set veth1 up &&
	rdma link add rxe0 type rxe netdev veth0 &&
	wait_until 10 test -c /dev/infiniband/uverbs0; } 2>&1); then
	rxe=yes
	pass "rxe0 up, /dev/infiniband: $(ls /dev/infiniband | tr '\n' ' ')"
else
	fail "Soft-RoCE setup (the device checks below will fail too)" "$out"
fi
grep -w infiniband_verbs /proc/devices | sed 's/^/vmsystemd: info: \/proc\/devices: /'

# --- the installed units --------------------------------------------------
section "the installed units"
# --man=no: the guest has no man-db (the host's ops suite checks the pages).
out=$(systemd-analyze verify --man=no rdmamemd.socket rdmamemd.service 2>&1)
is "systemd-analyze verify rdmamemd.socket rdmamemd.service: no complaint" "$out" ""
systemd-analyze security --no-pager rdmamemd.service >"$log_dir/security.txt" 2>&1
tail -n 1 "$log_dir/security.txt" | sed 's/^/vmsystemd: info: /'

# --- socket activation -------------------------------------------------------
section "socket activation"
expect "systemctl enable --now rdmamemd.socket" systemctl enable --now rdmamemd.socket
is "rdmamemd.socket active" "$(systemctl is-active rdmamemd.socket)" active
is "socket file mode, owner, group" "$(stat -c '%F %a %U %G' "$sock" 2>&1)" \
	"socket 660 root rdmamem"
is "rdmamemd.service not started before a client comes" \
	"$(systemctl is-active rdmamemd.service)" inactive

out=$(as alice rdmamemctl status 2>&1)
rc=$?
if [ $rc -eq 0 ]; then
	pass "alice (group rdmamem) runs rdmamemctl status"
else
	fail "alice (group rdmamem) runs rdmamemctl status (exit $rc)" "$out"
fi
echo "$out" | sed 's/^/    /'
is "the first connection started rdmamemd.service" "$(systemctl is-active rdmamemd.service)" active
is "SubState" "$(prop SubState)" running
matches "TriggeredBy names the socket" "$(prop TriggeredBy)" "rdmamemd\.socket"
is "Type" "$(prop Type)" notify
is "User" "$(prop User)" rdmamemd
is "Group" "$(prop Group)" rdmamem
is "WatchdogUSec (the test's drop-in)" "$(prop WatchdogUSec)" 3s
pid=$(prop MainPID)
[ "${pid:-0}" -gt 0 ] || fail "MainPID" "got '$pid'"
is "MainPID is rdmamemd" "$(cat /proc/"$pid"/comm 2>&1)" rdmamemd
out=$(journalctl --no-pager -q -u rdmamemd -o cat _PID="$pid")
matches "the daemon took the socket systemd passed" "$out" \
	"^Listening on '$sock' \(socket activated\)$"
matches "the daemon said it is ready (pid $pid)" "$out" "ready \(pid $pid\)"

# --- credentials, capabilities, limits --------------------------------------
section "credentials and capabilities of pid $pid"
st=$(cat /proc/"$pid"/status 2>&1)
field() { printf '%s\n' "$st" | awk -v f="$1:" '$1 == f { $1 = ""; sub(/^ /, ""); print }'; }
is "Uid (real, effective, saved, fs)" "$(field Uid | tr -s '\t ' ' ')" \
	"$rd_uid $rd_uid $rd_uid $rd_uid"
is "Gid" "$(field Gid | tr -s '\t ' ' ')" "$rd_gid $rd_gid $rd_gid $rd_gid"
# CAP_IPC_LOCK is capability 14: bit 0x4000.
is "CapEff: CAP_IPC_LOCK alone" "$(field CapEff)" 0000000000004000
is "CapPrm" "$(field CapPrm)" 0000000000004000
is "CapAmb" "$(field CapAmb)" 0000000000004000
is "CapBnd" "$(field CapBnd)" 0000000000004000
is "NoNewPrivs" "$(field NoNewPrivs)" 1
is "Seccomp (SystemCallArchitectures= filter)" "$(field Seccomp)" 2
lim=$(cat /proc/"$pid"/limits)
matches "Max locked memory unlimited" "$lim" "^Max locked memory +unlimited +unlimited"
matches "Max open files 524288" "$lim" "^Max open files +524288 +524288"

st_json=$(as alice rdmamemctl -j status 2>&1)
is "GetStatus: cap_ipc_lock" "$(printf '%s' "$st_json" | jq -r .cap_ipc_lock 2>&1)" true
is "GetStatus: memlock_limit" "$(printf '%s' "$st_json" | jq -r .memlock_limit 2>&1)" infinity

# --- the sandbox, seen from inside the service's mount namespace -------------
section "sandbox"
ns() { nsenter -t "$pid" -m -- "$@"; }
for p in /usr /etc /var; do
	out=$(ns touch "$p/.vmtest" 2>&1)
	if [ $? -ne 0 ] && grep -q 'Read-only file system' <<<"$out"; then
		pass "ProtectSystem=strict: $p read-only"
	else
		rm -f "$p/.vmtest"
		fail "ProtectSystem=strict: $p should be read-only" "$out"
	fi
done
out=$(nsenter -t "$pid" -m -S "$rd_uid" -G "$rd_gid" -- touch /run/rdmamemd/.vmtest 2>&1)
if [ $? -eq 0 ]; then
	pass "RuntimeDirectory: /run/rdmamemd writable for rdmamemd"
	rm -f /run/rdmamemd/.vmtest
else
	fail "RuntimeDirectory: /run/rdmamemd writable for rdmamemd" "$out"
fi
is "RuntimeDirectory owner (the service's user)" "$(stat -c '%U %G' /run/rdmamemd)" "rdmamemd rdmamem"
out=$(ns ls /home/alice 2>&1)
if [ $? -ne 0 ]; then
	pass "ProtectHome: /home/alice not visible"
else
	fail "ProtectHome: /home/alice should not be visible" "$out"
fi
touch /tmp/.vmtest-host
out=$(ns ls /tmp/.vmtest-host 2>&1)
if [ $? -ne 0 ]; then
	pass "PrivateTmp: the host's /tmp not visible"
else
	fail "PrivateTmp: the host's /tmp should not be visible" "$out"
fi
rm -f /tmp/.vmtest-host
# DevicePolicy=/DeviceAllow= are a BPF program on the service's cgroup: a
# shell moved into that cgroup meets it (the daemon met the allowed side).
is "DevicePolicy" "$(prop DevicePolicy)" closed
cg=/sys/fs/cgroup$(prop ControlGroup)
in_cgroup() {
	sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" "$@"
}
out=$(in_cgroup sh -c 'exec 3</dev/vda' 2>&1)
if [ $? -ne 0 ] && grep -q 'Operation not permitted' <<<"$out"; then
	pass "device access limited: /dev/vda denied in the service's cgroup"
else
	fail "device access limited: /dev/vda should be denied in the service's cgroup" "$out"
fi
if [ "$rxe" = yes ]; then
	for dev in /dev/infiniband/uverbs0 /dev/infiniband/rdma_cm; do
		expect "DeviceAllow=: $dev open read-write in the service's cgroup" \
			in_cgroup sh -c "exec 3<>$dev"
	done
fi

# --- doctor, devices -------------------------------------------------------
section "rdmamemctl doctor and devices as alice"
out=$(as alice rdmamemctl doctor 2>&1)
rc=$?
echo "$out" | sed 's/^/    /'
is "rdmamemctl doctor exit status" "$rc" 0
matches "doctor: locked memory PASS" "$out" "^PASS +locked memory"
matches "doctor: socket PASS (0660, group rdmamem)" "$out" "^PASS +socket .*mode 0660"
if [ "$rxe" = yes ]; then
	matches "doctor: rdma rxe0 PASS (port ACTIVE)" "$out" "^PASS +rdma rxe0 +port 1 ACTIVE"
	out=$(as alice rdmamemctl devices 2>&1)
	echo "$out" | sed 's/^/    /'
	matches "rdmamemctl devices lists rxe0 (DeviceAllow= lets the daemon open it)" "$out" "rxe0"
fi

# --- refused: not in group rdmamem ------------------------------------------
section "a user outside rdmamem"
out=$(as mallory rdmamemctl status 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -qi 'permission denied' <<<"$out"; then
	pass "mallory (not in rdmamem) refused by the socket's permissions"
else
	fail "mallory (not in rdmamem) should be refused with EACCES (exit $rc)" "$out"
fi

# --- STATUS= ---------------------------------------------------------------
wait_until 5 sh -c 'systemctl show rdmamemd --value -p StatusText | grep -q "^Serving"'
matches "StatusText from sd_notify" "$(prop StatusText)" \
	"^Serving [0-9]+ clients, [0-9]+ regions, [0-9]+ bytes pinned$"

# --- a region, at log level info ------------------------------------------
section "hello-region at log-level info"
out=$(as alice hello-region 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q 'hello, region, shared' <<<"$out"; then
	pass "hello-region (built against the installed tree) as alice: $out"
else
	fail "hello-region as alice (exit $rc)" "$out"
fi
sleep 1
n=$(journal_since -u rdmamemd -o verbose | grep -c '^ *REGION=')
is "no REGION= debug entries at log-level info" "$n" 0

# --- watchdog: the loop pings in time --------------------------------------
section "watchdog (WatchdogSec=3s)"
sleep 7
is "active after 7 s (> 2 x WatchdogSec)" "$(systemctl is-active rdmamemd)" active
is "same MainPID" "$(prop MainPID)" "$pid"
is "NRestarts" "$(prop NRestarts)" 0
out=$(journal_since -u rdmamemd -o cat | grep -i 'watchdog timeout')
is "no watchdog timeout in the journal" "$out" ""

# --- reload: SIGHUP under a connected client --------------------------------
section "systemctl reload with a client connected"
rm -f "$work/go"
as alice hold-client "$work/go" 120 >"$work/hold.out" 2>&1 &
hold=$!
if wait_until 30 grep -q connected "$work/hold.out"; then
	hold_pid=$(awk '/^connected pid/ { print $3 }' "$work/hold.out")
	pass "hold-client connected (pid $hold_pid)"
else
	fail "hold-client did not connect" "$(cat "$work/hold.out")"
	hold_pid=none
fi
out=$(rdmamemctl clients 2>&1)
matches "rdmamemctl clients (root) lists alice's held client" "$out" "\b$hold_pid\b"
wait_until 5 sh -c 'systemctl show rdmamemd --value -p StatusText | grep -q "^Serving 1 clients"'
matches "StatusText counts the held client" "$(prop StatusText)" "^Serving 1 clients"
set_key daemon log-level debug
expect "systemctl reload rdmamemd" timeout 30 systemctl reload rdmamemd
wait_until 10 sh -c "journalctl --no-pager -q -u rdmamemd -o cat --since @$t_start | grep -q 'Configuration reloaded'"
matches "the daemon logged the reload" "$(journal_since -u rdmamemd -o cat)" \
	"Configuration reloaded from $conf: [1-9][0-9]* settings changed"
is "active after reload" "$(systemctl is-active rdmamemd)" active
is "same MainPID after reload" "$(prop MainPID)" "$pid"
is "NRestarts after reload" "$(prop NRestarts)" 0
touch "$work/go"
if wait "$hold"; then
	pass "the held client's connection survived the reload: $(tail -n 1 "$work/hold.out")"
else
	fail "the held client's connection did not survive the reload" "$(cat "$work/hold.out")"
fi

# --- journal fields at debug ------------------------------------------------
section "journal fields at log-level debug"
out=$(as alice hello-region 2>&1) || fail "hello-region after reload" "$out"
wait_until 10 sh -c "journalctl --no-pager -q -u rdmamemd --since @$t_start -o verbose CLIENT_UID=$alice_uid | grep -q '^ *REGION='"
entry=$(journal_since -u rdmamemd -o verbose CLIENT_UID="$alice_uid" | grep -E '^ *(MESSAGE|REGION|CLIENT_PID|CLIENT_UID)=')
matches "journal: an entry with REGION=" "$entry" "^ *REGION=[0-9]+$"
matches "journal: with CLIENT_PID=" "$entry" "^ *CLIENT_PID=[0-9]+$"
matches "journal: with CLIENT_UID=$alice_uid" "$entry" "^ *CLIENT_UID=$alice_uid$"
matches "journal: the region's message" "$entry" "MESSAGE=Region [0-9]+: 4096 bytes of a memfd for pid [0-9]+ uid $alice_uid"
region=$(printf '%s\n' "$entry" | sed -n 's/^ *REGION=//p' | head -n 1)
out=$(journal_since -u rdmamemd REGION="${region:-none}" -o cat)
matches "journalctl -u rdmamemd REGION=$region: registered and released" "$out" \
	"^Region $region released$"
out=$(journal_since -u rdmamemd -p warning -o cat)
is "rdmamemd logged no warning or error so far" "$out" ""

# --- the Python package against the system daemon --------------------------
if [ ${#debs[@]} -gt 0 ]; then
	section "python3-rdmamem as alice"
	out=$(as alice python3 -c '
import rdmamem
with rdmamem.Client() as c:
    r = c.alloc(4096)
    r.memoryview()[:5] = b"hello"
    assert bytes(r.memoryview()[:5]) == b"hello"
    print("python3-rdmamem:", rdmamem.__file__, "region of", r.nbytes, "bytes")
' 2>&1)
	matches "python3-rdmamem registers memory with the system daemon" "$out" \
		"^python3-rdmamem: /usr/lib/python3/dist-packages/rdmamem/__init__.py region of 4096 bytes$"
fi

# --- rdmacm listener: AF_INET, /dev/infiniband/rdma_cm ----------------------
if [ "$rxe" = yes ]; then
	section "rdmacm listener (restart with rdmacm-listen = 10.9.0.1)"
	set_key rdma rdmacm-listen 10.9.0.1
	expect "systemctl restart rdmamemd" timeout 60 systemctl restart rdmamemd
	is "active with an rdmacm listener" "$(systemctl is-active rdmamemd)" active
	pid=$(prop MainPID)
	out=$(rdma resource show cm_id 2>&1)
	matches "rdma resource show cm_id: rdmamemd listens on 10.9.0.1" "$out" \
		"LISTEN.*comm rdmamemd.*src-addr 10\.9\.0\.1:7471|src-addr 10\.9\.0\.1:7471.*comm rdmamemd"
	out=$(journal_since -u rdmamemd -p warning -o cat)
	is "rdmamemd logged no warning or error with the listener" "$out" ""
fi

# --- restarts keep regions: the fd store ------------------------------------
# keep_restart HOW: alice's keep-client registers a region on rxe0, the
# daemon is restarted (HOW: "systemctl restart", or "kill -9" of the main
# process, which Restart=on-failure restarts), and the client's next call
# reclaims it: the same region, byte-exact, registered again on rxe0; a new
# region registers too; once the client is gone nothing is left.
keep_restart() {
	local how=$1 out pid0 restarts go=$work/keep-go-${1// /-} kout=$work/keep-${1// /-}.out
	local region rkey kpid
	rm -f "$go"
	as alice keep-client "$go" rxe0 120 >"$kout" 2>&1 &
	kpid=$!
	if ! wait_until 30 grep -q '^registered ' "$kout"; then
		fail "$how: keep-client registered a region on rxe0" "$(cat "$kout")"
		kill "$kpid" 2>/dev/null
		return
	fi
	read -r _ region _ rkey <"$kout"
	pass "$how: keep-client registered region $region on rxe0 (rkey $rkey)"
	pid0=$(prop MainPID)
	restarts=$(prop NRestarts)
	if [ "$how" = "kill -9" ]; then
		kill -9 "$pid0"
		wait_until 30 sh -c "[ \"\$(systemctl show rdmamemd --value -p NRestarts)\" -gt $restarts ] &&
			[ \"\$(systemctl is-active rdmamemd)\" = active ]" ||
			fail "$how: systemd restarted the daemon" "$(systemctl status --no-pager rdmamemd 2>&1)"
	else
		expect "$how: systemctl restart rdmamemd" timeout 60 systemctl restart rdmamemd
	fi
	pid=$(prop MainPID)
	if [ "$pid" != "$pid0" ] && [ "$(systemctl is-active rdmamemd)" = active ]; then
		pass "$how: a new daemon (pid $pid0 -> $pid)"
	else
		fail "$how: a new daemon" "pid $pid0 -> $pid, $(systemctl is-active rdmamemd)"
	fi
	out=$(journalctl --no-pager -q -u rdmamemd -o cat _PID="$pid")
	matches "$how: the new daemon restored the region from the fd store" "$out" \
		"^Fd store: [0-9]+ regions restored, waiting 120 s"
	st=$(rdmamemctl -j region "$region" 2>&1)
	is "$how: region $region waits for its owner (reclaim_in_msec)" \
		"$(printf '%s' "$st" | jq -r 'has("reclaim_in_msec")' 2>&1)" true
	touch "$go"
	if wait "$kpid"; then
		pass "$how: keep-client reclaimed its region"
	else
		fail "$how: keep-client reclaimed its region" "$(cat "$kout")"
		return
	fi
	out=$(cat "$kout")
	matches "$how: reclaimed region $region, registered again on rxe0" "$out" \
		"^reclaimed $region rkey [0-9]+ on rxe0, and [0-9]+$"
	matches "$how: its bytes are the client's (byte-exact)" "$out" "^byte-exact$"
	local new
	new=$(sed -n 's/^new \([0-9]*\) rkey.*/\1/p' "$kout")
	if [ -n "$new" ] && [ "$new" -gt "$region" ]; then
		pass "$how: a region registered after the restart is valid (id $new after $region)"
	else
		fail "$how: a region registered after the restart" "$out"
	fi
	matches "$how: the daemon logged the reclaim" \
		"$(journalctl --no-pager -q -u rdmamemd -o cat _PID="$pid")" \
		"^Region $region reclaimed by pid [0-9]+ uid $(id -u alice) after the restart$"
	# The client is gone: its regions, their MRs and memfds with it.
	wait_until 10 sh -c "[ \"\$(rdmamemctl -j status | jq -r .regions)\" = 0 ]"
	is "$how: no region left once the client exited" \
		"$(rdmamemctl -j status 2>&1 | jq -r .regions 2>&1)" 0
	is "$how: no memfd left open in the daemon" \
		"$(ls -l /proc/"$pid"/fd 2>/dev/null | grep -c 'memfd:keep-client')" 0
	is "$how: no MR left on rxe0" \
		"$(rdma resource show mr 2>/dev/null | grep -c 'comm rdmamemd')" 0
	# The store keeps the regions' state alone (one sealed memfd).
	is "$how: the fd store holds the state alone" "$(fdstore_current)" 1
}

# How many fds rdmamemd.service's fd store holds (PID 1's unit dump).
fdstore_current() {
	systemd-analyze dump 2>/dev/null | awk '/^-> Unit /{f = ($3 == "rdmamemd.service:")}
		f && /File Descriptor Store Current:/ {print $NF; exit}'
}

if [ "$rxe" = yes ]; then
	section "restart keeps regions (fd store)"
	is "FileDescriptorStoreMax" "$(prop FileDescriptorStoreMax)" 65536
	keep_restart "systemctl restart"
	keep_restart "kill -9"
fi

# --- what keeping a VMM region's files rests on -------------------------------
# rdmamemd puts a CUDA VMM region's fds into the store each held in flight
# by a datagram socket of its own (util/fdhold): systemd keeps one fd per
# open file, and a client may send one file for several regions. Here a
# service of its own restarts on failure with its store; both holders of
# one file come back holding it, the file itself only once.
section "files held by sockets in the fd store"
rm -f "$work/fdhold.out"
expect "systemd-run fdhold-service (Restart=on-failure, an fd store)" \
	systemd-run -q --unit=fdhold-check -p Restart=on-failure -p RestartSec=100ms \
	-p NotifyAccess=main -p FileDescriptorStoreMax=8 \
	/usr/local/bin/fdhold-service "$work/fdhold.out"
wait_until 30 test -s "$work/fdhold.out" ||
	fail "fdhold-service ran again with its store" "$(systemctl status --no-pager fdhold-check 2>&1)"
out=$(sort "$work/fdhold.out" 2>&1)
is "both holders of one file came back holding it, the file once" "$(echo $out)" \
	"held1 held fdhold-pattern held2 held fdhold-pattern raw1 file fdhold-pattern"

# --- watchdog: a stopped loop gets the service restarted ---------------------
section "watchdog fires on a stopped daemon"
restarts=$(prop NRestarts)
kill -STOP "$pid"
if wait_until 30 sh -c "[ \"\$(systemctl show rdmamemd --value -p NRestarts)\" -gt $restarts ] &&
	[ \"\$(systemctl is-active rdmamemd)\" = active ]"; then
	pass "SIGSTOPped daemon restarted by the watchdog (NRestarts $(prop NRestarts), new pid $(prop MainPID))"
else
	fail "SIGSTOPped daemon not restarted within 30 s" \
		"$(systemctl status --no-pager rdmamemd 2>&1)"
	kill -CONT "$pid" 2>/dev/null
fi
matches "PID 1 logged the watchdog timeout" \
	"$(journal_since -u rdmamemd -o cat _PID=1)" "[Ww]atchdog timeout"
expect "alice's rdmamemctl ping after the restart" as alice rdmamemctl ping

# --- stop --------------------------------------------------------------------
section "stop"
pid=$(prop MainPID)
expect "systemctl stop rdmamemd.socket rdmamemd.service" \
	timeout 60 systemctl stop rdmamemd.socket rdmamemd.service
is "rdmamemd.service inactive" "$(systemctl is-active rdmamemd.service)" inactive
is "rdmamemd.socket inactive" "$(systemctl is-active rdmamemd.socket)" inactive
is "stop result" "$(prop Result)" success
out=$(ps -u rdmamemd -o pid=,comm= 2>&1)
is "no process of user rdmamemd left" "$out" ""
[ -e "/proc/$pid" ] && fail "pid $pid still exists" || pass "pid $pid gone"
[ -e "$sock" ] && fail "$sock left behind (RemoveOnStop=yes)" || pass "socket file removed"
matches "the daemon logged its shutdown" "$(journal_since -u rdmamemd -o cat)" "Shutting down"

# --- removing the package stops a running daemon ---------------------------
if [ ${#debs[@]} -gt 0 ]; then
	section "dpkg --purge with the daemon running"
	systemctl start rdmamemd.socket
	as alice rdmamemctl ping >/dev/null 2>&1
	is "socket activation again before the purge" "$(systemctl is-active rdmamemd.service)" active
	pid=$(prop MainPID)
	expect "dpkg --purge python3-rdmamem rdmamemd" \
		timeout 120 dpkg --purge python3-rdmamem rdmamemd
	is "rdmamemd.service inactive after the purge" "$(systemctl is-active rdmamemd.service)" inactive
	is "rdmamemd.socket inactive after the purge" "$(systemctl is-active rdmamemd.socket)" inactive
	[ -e "/proc/$pid" ] && fail "pid $pid still runs after the purge" || pass "pid $pid gone"
	[ -e /lib/systemd/system/rdmamemd.service ] && fail "the unit is left after the purge" ||
		pass "the units are gone"
	[ -e "$conf" ] && fail "$conf is left after the purge" || pass "$conf purged"
fi

# --- the record --------------------------------------------------------------
journalctl --no-pager -b -o short-monotonic >"$log_dir/journal.txt" 2>&1
journalctl --no-pager -b -u rdmamemd -o verbose >"$log_dir/rdmamemd-verbose.txt" 2>&1
section "PID 1 about rdmamemd, warnings and worse"
journalctl --no-pager -q -b _PID=1 -p warning -o cat | grep -i rdmamem | sed 's/^/    /'
if [ "$failed" -gt 0 ]; then
	section "journal of rdmamemd"
	journalctl --no-pager -q -b -u rdmamemd -u rdmamemd.socket -o short-monotonic | tail -n 60 | sed 's/^/    /'
fi

echo "vmsystemd: $passed passed, $failed failed"
printf '\nVMTEST-RESULT rc=%d\n' "$((failed > 0))"
sync
exit 0
