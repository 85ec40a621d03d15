// SPDX-License-Identifier: BSD-3-Clause

// The cases: each calls one method, with valid parameters for a reply or
// with the mistake that provokes one declared error, and every message the
// daemon sends back is held against the IDL (main.go, check). Cases run in
// order and share what they learn (s.v: region ids, leases, tokens), so the
// lists come back non-empty and GetRegion shows shares, leases and a source.
//
// A new method or error in the IDL needs a case here (or, for an error no
// client can cause, an entry in unprovokable): the run fails without one.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/varlink/go/varlink"
)

type testCase struct {
	what string
	// "lib": through the reference library; "raw", "raw2": the suite's own
	// Varlink on two more connections, for file descriptors and exact bytes.
	conn      string
	method    string
	params    func(s *suite) interface{} // nil: no parameters (the library sends null)
	fds       func(s *suite) ([]*os.File, error)
	err       string            // the error expected; "" for a reply
	errParams map[string]string // values the error's parameters must have
	// Why the case cannot run here, or "".
	need func(s *suite) string
	// Checks beyond the IDL, and what later cases need.
	then func(s *suite, r *reply) error
	// A case that is more than one call; covers names the methods and
	// errors it would check, for the skip bookkeeping.
	custom func(s *suite) error
	covers []string
}

const noRDMA = "no RDMA device here (make vmtest runs this case on Soft-RoCE)"

// Errors a client cannot cause, or not on this kind of machine; reported as
// skipped with the reason when nothing provoked them.
var unprovokable = []struct{ err, why string }{
	{"io.rdmamemd.InternalError", "the daemon's own failure (out of memory, a broken invariant): no client can cause it"},
	{"org.varlink.service.MethodNotImplemented", "rdmamemd implements every method it declares; the method cases show each one answers"},
	{"org.varlink.service.PermissionDenied", "rdmamemd refuses with io.rdmamemd.PermissionDenied, which says what was refused"},
	{"org.varlink.service.ExpectedMore", "no method of io.rdmamemd requires \"more\""},
	{"io.rdmamemd.RemoteAccessError", "a transfer needs a registration and a reachable rdmacm endpoint, which this suite's daemon does not have (the transfer unit suite provokes it over the fake verbs)"},
	{"io.rdmamemd.PeerUnreachable", "a transfer needs a registration, which this suite's daemon does not have (the transfer unit suite provokes it over the fake verbs)"},
	{"io.rdmamemd.TransferCancelled", "a transfer must be in flight when its client leaves, and then nobody reads the error (the transfer unit suite checks it)"},
	{"io.rdmamemd.TransferFailed", "a transfer needs a registration and a reachable rdmacm endpoint, which this suite's daemon does not have (the transfer unit suite provokes it over the fake verbs)"},
}

func obj(kv ...interface{}) func(s *suite) interface{} {
	return func(s *suite) interface{} {
		m := map[string]interface{}{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = s.resolve(kv[i+1])
		}
		return m
	}
}

// resolve replaces "$name" by the value an earlier case learnt, in nested
// objects too; the case's own literal stays as written.
func (s *suite) resolve(v interface{}) interface{} {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "$") {
			return s.v[x[1:]]
		}
	case map[string]interface{}:
		m := map[string]interface{}{}
		for k, e := range x {
			m[k] = s.resolve(e)
		}
		return m
	}
	return v
}

func memfdOf(size int64, pattern string, sealed bool) func(s *suite) ([]*os.File, error) {
	return func(s *suite) ([]*os.File, error) {
		f, err := newMemfd(size, []byte(pattern), sealed)
		if err != nil {
			return nil, err
		}
		return []*os.File{f}, nil
	}
}

// learn keeps a string field of the reply under key, for later cases.
func learn(key, field string) func(s *suite, r *reply) error {
	return func(s *suite, r *reply) error {
		v := r.str(field)
		if v == "" {
			return fmt.Errorf("no %q in the reply: %s", field, r.raw)
		}
		s.v[key] = v
		return nil
	}
}

func wantField(field, want string) func(s *suite, r *reply) error {
	return func(s *suite, r *reply) error {
		if got := fmt.Sprint(r.obj()[field]); got != want {
			return fmt.Errorf("%s is %q, want %q", field, got, want)
		}
		return nil
	}
}

func nonEmpty(field string) func(s *suite, r *reply) error {
	return func(s *suite, r *reply) error {
		if a, _ := r.obj()[field].([]interface{}); len(a) == 0 {
			return fmt.Errorf("%s is empty: the case before should have filled it: %s", field, r.raw)
		}
		return nil
	}
}

func all(fs ...func(s *suite, r *reply) error) func(s *suite, r *reply) error {
	return func(s *suite, r *reply) error {
		for _, f := range fs {
			if err := f(s, r); err != nil {
				return err
			}
		}
		return nil
	}
}

func needRoot(s *suite) string {
	if os.Geteuid() != 0 {
		return "needs root"
	}
	return ""
}

func needDevice(s *suite) string {
	if s.v["device"] == "" {
		return noRDMA
	}
	return ""
}

// The case's premise is a region registered nowhere, which holds only
// where the daemon has no device to register $A on.
func needNoDevice(s *suite) string {
	if s.v["device"] != "" {
		return "region $A is registered on " + s.v["device"] + " here (the next case covers it)"
	}
	return ""
}

var cases = []*testCase{
	// --- introspection, through the library's own helpers -------------------
	{what: "the library's GetInfo() and GetInterfaceDescription()", custom: libIntrospection,
		covers: []string{"org.varlink.service.GetInfo", "org.varlink.service.GetInterfaceDescription"}},
	{what: "GetInfo", conn: "lib", method: "org.varlink.service.GetInfo"},
	{what: "GetInterfaceDescription io.rdmamemd", conn: "lib",
		method: "org.varlink.service.GetInterfaceDescription", params: obj("interface", "io.rdmamemd")},
	{what: "Ping", conn: "lib", method: "io.rdmamemd.Ping"},
	{what: "Ping with data", conn: "lib", method: "io.rdmamemd.Ping", params: obj("data", "héllo\x01"),
		then: wantField("data", "héllo\x01")},
	{what: "GetStatus", conn: "lib", method: "io.rdmamemd.GetStatus"},
	{what: "GetStats", conn: "lib", method: "io.rdmamemd.GetStats"},
	{what: "GetMetrics", conn: "lib", method: "io.rdmamemd.GetMetrics",
		params: obj("format", "prometheus")},
	{what: "GetLimits", conn: "lib", method: "io.rdmamemd.GetLimits"},

	// --- regions: file descriptors, so the suite's own connection ------------
	{what: "Register a sealed memfd", conn: "raw", method: "io.rdmamemd.Register",
		params: obj("fd", 0, "devices", []string{}), fds: memfdOf(65536, "A", true),
		then: all(learn("A", "region"), wantField("size", "65536"))},
	{what: "Register with access and a range", conn: "raw", method: "io.rdmamemd.Register",
		params: obj("fd", 0, "offset", "4096", "length", "65536",
			"access", []string{"local_write", "remote_read"}),
		fds:  memfdOf(3*65536, "B", true),
		then: all(learn("B", "region"), wantField("size", "65536"))},
	{what: "Register a read-only memfd", conn: "raw", method: "io.rdmamemd.Register",
		params: obj("fd", 0),
		fds: func(s *suite) ([]*os.File, error) {
			f, err := newMemfd(4096, []byte("R"), true)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			ro, err := reopenReadOnly(f)
			return []*os.File{ro}, err
		},
		then: all(learn("RO", "region"), wantField("writable", "false"))},
	{what: "Register one to unregister", conn: "raw", method: "io.rdmamemd.Register",
		params: obj("fd", 0), fds: memfdOf(4096, "C", true), then: learn("C", "region")},
	{what: "Share with a uid, read-only", conn: "lib", method: "io.rdmamemd.Share",
		params: obj("region", "$A", "uid", 65534, "readonly", true)},
	{what: "Share with a gid", conn: "lib", method: "io.rdmamemd.Share",
		params: obj("region", "$A", "gid", 65534)},
	{what: "Unshare the gid", conn: "lib", method: "io.rdmamemd.Unshare",
		params: obj("region", "$A", "gid", 65534)},
	{what: "a hugetlb memfd and no huge pages to map it", conn: "raw", method: "io.rdmamemd.Register",
		params: obj("fd", 0), need: needNoHugePages, fds: hugetlbMemfd,
		err: "io.rdmamemd.MemoryUnavailable"},
	{what: "CreateAccessToken", conn: "lib", method: "io.rdmamemd.CreateAccessToken",
		then: learn("token", "token")},
	{what: "CreateAccessToken, to revoke", conn: "lib", method: "io.rdmamemd.CreateAccessToken",
		then: learn("token2", "token")},
	{what: "RevokeAccessToken", conn: "lib", method: "io.rdmamemd.RevokeAccessToken",
		params: obj("token", "$token2")},
	{what: "Lock shared", conn: "lib", method: "io.rdmamemd.Lock",
		params: obj("region", "$A", "mode", "shared"),
		then:   all(learn("lease", "lease"), wantField("mode", "shared"))},
	{what: "GetRegion with shares, a lease and its source", conn: "lib", method: "io.rdmamemd.GetRegion",
		params: obj("region", "$A"),
		then: all(nonEmpty("shares"), nonEmpty("lease_list"), func(s *suite, r *reply) error {
			src, _ := r.obj()["source"].(map[string]interface{})
			if src["type"] != "memfd" || src["file_size"] == nil || src["seals"] == nil {
				return fmt.Errorf("a memfd region's source lacks type, file_size or seals: %s", r.raw)
			}
			return nil
		})},
	{what: "ListRegions", conn: "lib", method: "io.rdmamemd.ListRegions", then: nonEmpty("regions")},
	{what: "ListClients", conn: "lib", method: "io.rdmamemd.ListClients", then: nonEmpty("clients")},
	{what: "Read under a lease", conn: "lib", method: "io.rdmamemd.Read",
		params: obj("region", "$A", "offset", "0", "length", "4", "lease", "$lease", "timeout_ms", 1000),
		then:   all(wantField("length", "4"), wantField("data", base64.StdEncoding.EncodeToString([]byte("AAAA"))))},
	{what: "Unlock", conn: "lib", method: "io.rdmamemd.Unlock", params: obj("lease", "$lease")},
	{what: "Write", conn: "lib", method: "io.rdmamemd.Write",
		params: obj("region", "$A", "offset", "16", "mode", "disjoint",
			"data", base64.StdEncoding.EncodeToString([]byte("conformance"))),
		then: wantField("length", "11")},
	{what: "Copy", conn: "lib", method: "io.rdmamemd.Copy",
		params: obj("from", map[string]interface{}{"region": "$A", "offset": "0"},
			"to", map[string]interface{}{"region": "$B", "offset": "4096"}, "length", "4096"),
		then: wantField("length", "4096")},
	{what: "Lock exclusive", conn: "lib", method: "io.rdmamemd.Lock",
		params: obj("region", "$B", "mode", "exclusive", "timeout_ms", 5000),
		then:   all(learn("lease2", "lease"), wantField("mode", "exclusive"))},
	{what: "Unlock the exclusive lease", conn: "lib", method: "io.rdmamemd.Unlock", params: obj("lease", "$lease2")},
	{what: "RegisterOn no device", conn: "lib", method: "io.rdmamemd.RegisterOn",
		params: obj("region", "$A", "devices", []string{})},
	{what: "ListDevices", conn: "lib", method: "io.rdmamemd.ListDevices", then: learnDevice},
	{what: "RegisterOn every device", conn: "lib", method: "io.rdmamemd.RegisterOn",
		params: obj("region", "$A", "devices", "all"), then: registeredEverywhere},
	{what: "RegisterOn a device that is not there", conn: "lib", method: "io.rdmamemd.RegisterOn",
		params: obj("region", "$B", "devices", []string{"nosuchdev0"}),
		then: func(s *suite, r *reply) error {
			regs, _ := r.obj()["registrations"].([]interface{})
			for _, x := range regs {
				// A name that is no device is answered but not kept
				// (errno 19, ENODEV): only a real device's failure is
				// recorded for RetryRegistration to clear.
				if m, _ := x.(map[string]interface{}); m["state"] == "failed" && m["errno"] != json.Number("19") {
					s.v["failed"] = m["device"].(string)
				}
			}
			return nil
		}},
	// --- descriptors, remote handles, plans ------------------------------------
	{what: "ExportRegion of a region registered nowhere", conn: "lib", method: "io.rdmamemd.ExportRegion",
		params: obj("region", "$B"), err: "io.rdmamemd.NotRegistered"},
	// The suite's daemon listens for no rdmacm connections.
	{what: "ExportRegion with no rdmacm listener", conn: "lib", method: "io.rdmamemd.ExportRegion",
		params: obj("region", "$A"), need: needDevice, err: "io.rdmamemd.NoRdmaEndpoint"},
	{what: "ExportRegion", conn: "lib", method: "io.rdmamemd.ExportRegion", params: obj("region", "$A"),
		need: func(s *suite) string {
			return "a descriptor needs a registration and an rdmacm listener, which this suite's daemon does not have (the remote suite's rdma cases export in the VM)"
		}},
	// One IPv4 endpoint (10.0.2.15:7471), one device (rxe0), 1 MiB,
	// read and write: tests/fuzz/gen-seeds.py's "one" record.
	{what: "ImportRemote", conn: "lib", method: "io.rdmamemd.ImportRemote",
		params: obj("descriptor", "rdmamem1.AQMBAQcAAAAAAAAAAAAQAAAAAACgoaKjpKWmp6ipqqusra6vBAAvHQoAAg8AAAAAAAAAAAAAAAAAAQIDBAUGBwgJCgsMDQ4PABAAAAB_AAA0EgAAAQRyeGUw"),
		then:   all(learn("remote", "remote"), wantField("length", "1048576"), wantField("export", "7"))},
	{what: "ImportRemote of a broken descriptor", conn: "lib", method: "io.rdmamemd.ImportRemote",
		params: obj("descriptor", "rdmamem1.AQMBAQ"), err: "org.varlink.service.InvalidParameter",
		errParams: map[string]string{"parameter": "descriptor"}},
	{what: "PrepareTransfer", conn: "lib", method: "io.rdmamemd.PrepareTransfer",
		params: obj("region", "$A", "remote", "$remote", "ranges", []interface{}{
			map[string]interface{}{"local_offset": "0", "remote_offset": "4096", "length": "16"}}),
		then: learn("plan", "plan")},
	// Packed ranges (PROTOCOL.md): one, (0, 4096, 16), as little-endian u64s.
	{what: "PrepareTransfer, packed", conn: "lib", method: "io.rdmamemd.PrepareTransfer",
		params: obj("region", "$A", "remote", "$remote", "packed", "AAAAAAAAAAAAEAAAAAAAABAAAAAAAAAA"),
		then:   learn("packed_plan", "plan")},
	{what: "PrepareTransfer, packed, not whole ranges", conn: "lib", method: "io.rdmamemd.PrepareTransfer",
		params: obj("region", "$A", "remote", "$remote", "packed", "AAAAAAAAAAAAEAAAAAAAABAAAAAAAAA="),
		err:    "org.varlink.service.InvalidParameter", errParams: map[string]string{"parameter": "packed"}},
	{what: "Transfer batch of a region registered nowhere", conn: "lib", method: "io.rdmamemd.Transfer",
		params: obj("batch", map[string]interface{}{"op": "write", "local": map[string]interface{}{"region": "$A"},
			"remote": map[string]interface{}{"id": "$remote"}, "packed": "AAAAAAAAAAAAEAAAAAAAABAAAAAAAAAA"}),
		need: needNoDevice, err: "io.rdmamemd.NotRegistered"},
	{what: "ReleasePlan, packed", conn: "lib", method: "io.rdmamemd.ReleasePlan", params: obj("plan", "$packed_plan")},
	{what: "Transfer of a region registered nowhere", conn: "lib", method: "io.rdmamemd.Transfer",
		params: obj("plan", "$plan", "op", "write", "indices", []interface{}{"0"}),
		need:   needNoDevice, err: "io.rdmamemd.NotRegistered"},
	// Registered: the daemon tries the descriptor's endpoint, which no host
	// of the suite's has.
	{what: "Transfer to an endpoint nobody serves", conn: "lib", method: "io.rdmamemd.Transfer",
		params: obj("plan", "$plan", "op", "write", "indices", []interface{}{"0"}),
		need:   needDevice, err: "io.rdmamemd.PeerUnreachable"},
	{what: "Transfer past the plan", conn: "lib", method: "io.rdmamemd.Transfer",
		params: obj("plan", "$plan", "op", "write", "indices", []interface{}{"1"}),
		err:    "io.rdmamemd.OutOfRange"},
	{what: "Transfer", conn: "lib", method: "io.rdmamemd.Transfer",
		params: obj("plan", "$plan", "op", "write"),
		need: func(s *suite) string {
			return "a transfer needs a registration and a reachable rdmacm endpoint, which this suite's daemon does not have (the transfer unit suite runs it over the fake verbs)"
		}},
	{what: "ReleasePlan", conn: "lib", method: "io.rdmamemd.ReleasePlan", params: obj("plan", "$plan")},
	{what: "ReleasePlan again", conn: "lib", method: "io.rdmamemd.ReleasePlan", params: obj("plan", "$plan"),
		err: "io.rdmamemd.NoSuchPlan"},
	{what: "ReleaseRemote", conn: "lib", method: "io.rdmamemd.ReleaseRemote", params: obj("remote", "$remote")},
	{what: "ReleaseRemote again", conn: "lib", method: "io.rdmamemd.ReleaseRemote", params: obj("remote", "$remote"),
		err: "io.rdmamemd.NoSuchRemote"},
	// Nothing sends this suite's daemon notifications: the poll form
	// answers an empty list, at once or after its timeout.
	{what: "WaitNotifications", conn: "lib", method: "io.rdmamemd.WaitNotifications"},
	{what: "WaitNotifications with a timeout", conn: "lib", method: "io.rdmamemd.WaitNotifications",
		params: obj("timeout_ms", 20, "max", 4)},
	{what: "WaitNotifications with max 0", conn: "lib", method: "io.rdmamemd.WaitNotifications",
		params: obj("max", 0), err: "org.varlink.service.InvalidParameter",
		errParams: map[string]string{"parameter": "max"}},
	{what: "RetryRegistration", conn: "lib", method: "io.rdmamemd.RetryRegistration",
		params: obj("region", "$B", "device", "$failed"),
		need: func(s *suite) string {
			if why := needRoot(s); why != "" {
				return why
			}
			if s.v["failed"] == "" {
				return "no recorded registration failure to clear: only a real device records one (check_rdma provokes it in the VM with a low memlock limit)"
			}
			return ""
		}},
	{what: "ListGpus", conn: "lib", method: "io.rdmamemd.ListGpus"},
	{what: "ListGpus, probing the driver", conn: "lib", method: "io.rdmamemd.ListGpus",
		params: obj("probe", true),
		then: func(s *suite, r *reply) error {
			if d, _ := r.obj()["driver"].(map[string]interface{}); d["loaded"] == true {
				s.v["cuda"] = "loaded"
			}
			return nil
		}},
	{what: "ConnectQueuePair", conn: "lib", method: "io.rdmamemd.ConnectQueuePair", need: needDevice,
		params: obj("device", "$device", "token", "$token", "qpn", 0x123, "psn", 7, "gid", "$gid"),
		then: func(s *suite, r *reply) error {
			s.v["qp"] = "connected"
			return nil
		}},
	{what: "ListConnections", conn: "lib", method: "io.rdmamemd.ListConnections",
		then: func(s *suite, r *reply) error {
			if s.v["qp"] != "" {
				return nonEmpty("connections")(s, r)
			}
			return nil
		}},
	// The daemon's own links to other daemons: those the Transfer cases
	// above tried, if any (their endpoint serves nobody); the reply's
	// types are checked against the IDL like every other.
	{what: "ListLinks", conn: "lib", method: "io.rdmamemd.ListLinks", params: obj("limit", 8)},
	// Nothing waits for Reclaim without a restart (tests/python/test_restart.py and
	// make vmsystemd restart the daemon): a region held by its owner is refused.
	{what: "Reclaim", conn: "lib", method: "io.rdmamemd.Reclaim",
		params: obj("region", "$C", "token", "0123456789abcdef0123456789abcdef"),
		need: func(s *suite) string {
			return "a region waits for Reclaim only after a restart that kept it in a service manager's fd store (tests/python/test_restart.py and make vmsystemd reclaim through librdmamem)"
		}},
	{what: "Reclaim of a region its owner holds", conn: "lib", method: "io.rdmamemd.Reclaim",
		params: obj("region", "$C", "token", "0123456789abcdef0123456789abcdef"),
		err:    "io.rdmamemd.NoSuchRegion"},
	{what: "Unregister", conn: "lib", method: "io.rdmamemd.Unregister", params: obj("region", "$C")},

	// --- every declared error, once ------------------------------------------
	{what: "unknown parameter", conn: "raw", method: "io.rdmamemd.Ping", params: obj("bogus", 1),
		err: "org.varlink.service.InvalidParameter", errParams: map[string]string{"parameter": "bogus"}},
	{what: "missing parameter", conn: "raw", method: "io.rdmamemd.GetRegion",
		err: "org.varlink.service.InvalidParameter", errParams: map[string]string{"parameter": "region"}},
	{what: "an empty range", conn: "raw", method: "io.rdmamemd.Register", params: obj("fd", 0),
		fds: memfdOf(0, "", true),
		err: "org.varlink.service.InvalidParameter", errParams: map[string]string{"parameter": "fd"}},
	{what: "unknown parameter, as the library sees it", custom: libDecodesServiceErrors},
	{what: "unknown method", conn: "raw", method: "io.rdmamemd.Nope",
		err: "org.varlink.service.MethodNotFound", errParams: map[string]string{"method": "io.rdmamemd.Nope"}},
	{what: "unknown interface", conn: "raw", method: "com.example.Nope",
		err: "org.varlink.service.InterfaceNotFound", errParams: map[string]string{"interface": "com.example"}},
	{what: "description of an unknown interface", conn: "raw",
		method: "org.varlink.service.GetInterfaceDescription", params: obj("interface", "com.example.nope"),
		err: "org.varlink.service.InterfaceNotFound", errParams: map[string]string{"interface": "com.example.nope"}},
	{what: "not JSON", custom: invalidMessage, covers: []string{"io.rdmamemd.InvalidMessage"}},
	{what: "a file descriptor on Ping", conn: "raw", method: "io.rdmamemd.Ping",
		fds: func(s *suite) ([]*os.File, error) {
			f, err := os.Open("/dev/null")
			return []*os.File{f}, err
		},
		err: "io.rdmamemd.TooManyFileDescriptors"},
	{what: "a message over 16 MiB", custom: messageTooLarge, covers: []string{"io.rdmamemd.MessageTooLarge"}},
	{what: "no such region", conn: "raw", method: "io.rdmamemd.GetRegion", params: obj("region", "4000000000"),
		err: "io.rdmamemd.NoSuchRegion"},
	{what: "another uid's region", custom: permissionDenied, covers: []string{"io.rdmamemd.PermissionDenied"}},
	{what: "over the pinned-bytes quota", conn: "raw", method: "io.rdmamemd.Register",
		params: obj("fd", 0), fds: memfdOf(64<<20, "", true), err: "io.rdmamemd.QuotaExceeded",
		errParams: map[string]string{"quota": "pinned_bytes", "limit": "33554432", "requested": "67108864"}},
	{what: "a pipe", conn: "raw", method: "io.rdmamemd.Register", params: obj("fd", 0),
		fds: func(s *suite) ([]*os.File, error) {
			r, w, err := os.Pipe()
			if err != nil {
				return nil, err
			}
			w.Close()
			return []*os.File{r}, nil
		},
		err: "io.rdmamemd.NotAMemfd"},
	{what: "an unsealed memfd", conn: "raw", method: "io.rdmamemd.Register", params: obj("fd", 0),
		fds: memfdOf(4096, "", false), err: "io.rdmamemd.MissingSeal"},
	{what: "a range past the end", conn: "raw", method: "io.rdmamemd.Read",
		params: obj("region", "$A", "offset", "65536", "length", "1"), err: "io.rdmamemd.OutOfRange"},
	{what: "a write to a read-only region", conn: "raw", method: "io.rdmamemd.Write",
		params: obj("region", "$RO", "data", "AAAA"), err: "io.rdmamemd.ReadOnlyRegion"},
	{what: "a read above the inline limit", conn: "raw", method: "io.rdmamemd.Read",
		params: obj("region", "$A", "length", "16777216"), err: "io.rdmamemd.TransferTooLarge"},
	{what: "no such lease", conn: "raw", method: "io.rdmamemd.Unlock", params: obj("lease", "4000000000"),
		err: "io.rdmamemd.NoSuchLease"},
	{what: "take a shared lease", conn: "raw", method: "io.rdmamemd.Lock",
		params: obj("region", "$A", "mode", "shared"), then: learn("rawlease", "lease")},
	{what: "write under a shared lease", conn: "raw", method: "io.rdmamemd.Write",
		params: obj("region", "$A", "data", "AAAA", "lease", "$rawlease"), err: "io.rdmamemd.LeaseConflict"},
	{what: "give the shared lease back", conn: "raw", method: "io.rdmamemd.Unlock", params: obj("lease", "$rawlease")},
	{what: "take an exclusive lease", conn: "raw", method: "io.rdmamemd.Lock",
		params: obj("region", "$B", "mode", "exclusive"), then: learn("rawlease", "lease")},
	{what: "a lock that is taken, without waiting", conn: "raw2", method: "io.rdmamemd.Lock",
		params: obj("region", "$B", "mode", "exclusive", "timeout_ms", 0), err: "io.rdmamemd.LockTimeout"},
	{what: "give the exclusive lease back", conn: "raw", method: "io.rdmamemd.Unlock", params: obj("lease", "$rawlease")},
	{what: "no such device", conn: "raw", method: "io.rdmamemd.ConnectQueuePair",
		params: obj("device", "nosuchdev0", "token", "$token", "qpn", 0x123, "psn", 0, "gid", "::1"),
		err:    "io.rdmamemd.NoSuchDevice"},
	{what: "no such token", conn: "raw", method: "io.rdmamemd.RevokeAccessToken",
		params: obj("token", strings.Repeat("0", 32)), err: "io.rdmamemd.InvalidToken"},
	{what: "a GPU import without a driver", conn: "raw", method: "io.rdmamemd.Register",
		params: obj("memory", "cuda-ipc", "ipc_handle", strings.Repeat("01", 64)),
		err:    "io.rdmamemd.CudaUnavailable",
		need: func(s *suite) string {
			if s.v["cuda"] != "" {
				return "a CUDA driver is installed here"
			}
			return ""
		}},
	{what: "a GPU import the driver refuses", conn: "raw", method: "io.rdmamemd.Register",
		params: obj("memory", "cuda-ipc", "ipc_handle", strings.Repeat("5a", 64)),
		err:    "io.rdmamemd.CudaError",
		need: func(s *suite) string {
			if s.v["cuda"] == "" {
				return "no CUDA driver here to refuse a call (the cuda and gpu suites provoke it with their fake driver)"
			}
			return ""
		}},
	{what: "connection limit and shutdown, on a daemon of their own", custom: limitAndShutdown,
		covers: []string{"io.rdmamemd.TooManyConnections", "io.rdmamemd.ShuttingDown"}},
	{what: "a peer outside the allowed networks, on a daemon of its own", custom: networkNotAllowed,
		covers: []string{"io.rdmamemd.NetworkNotAllowed"}},
}

// networkNotAllowed: a daemon that admits RDMA peers from 10.99.0.0/16 only
// refuses a ConnectQueuePair from a GID elsewhere before it looks at the
// token or the device, so this needs no RDMA device.
func networkNotAllowed(s *suite) error {
	d, err := startDaemon(s.bin, "net", "--rdma-allow-network", "10.99.0.0/16")
	if err != nil {
		return err
	}
	defer d.stop(true)
	c, err := dialRaw(d.socket)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.call("io.rdmamemd.CreateAccessToken", nil, nil)
	if err != nil {
		return err
	}
	s.check("io.rdmamemd.CreateAccessToken", r)
	if !s.expect("io.rdmamemd.CreateAccessToken", r, "", nil) {
		return nil
	}
	r, err = c.call("io.rdmamemd.ConnectQueuePair", map[string]interface{}{
		"device": "nosuchdev0", "token": r.str("token"), "qpn": 0x123, "psn": 0,
		"gid": "::ffff:10.1.2.3"}, nil)
	if err != nil {
		return err
	}
	s.check("io.rdmamemd.ConnectQueuePair", r)
	s.expect("io.rdmamemd.ConnectQueuePair", r, "io.rdmamemd.NetworkNotAllowed", nil)
	return nil
}

func (s *suite) runCase(c *testCase) {
	if c.need != nil {
		if why := c.need(s); why != "" {
			if why == noRDMA && s.requireRDMA {
				s.failf("-require-rdma, but %s", why)
				return
			}
			s.skip(c, why)
			return
		}
	}
	if c.custom != nil {
		if err := c.custom(s); err != nil {
			s.failf("%v", err)
		}
		return
	}
	var params interface{}
	if c.params != nil {
		params = c.params(s)
	}
	r, err := s.callOn(c.conn, c.method, params, c.fds)
	if err != nil {
		s.failf("%s: %v", c.method, err)
		return
	}
	if !s.expect(c.method, r, c.err, c.errParams) {
		return
	}
	if c.then != nil {
		if err := c.then(s, r); err != nil {
			s.failf("%v", err)
		}
	}
}

// callOn makes one call and checks what comes back against the IDL.
func (s *suite) callOn(conn, method string, params interface{},
	fds func(s *suite) ([]*os.File, error)) (*reply, error) {
	if conn == "lib" {
		if fds != nil {
			panic("the Go library passes no file descriptors")
		}
		r, fromLibrary, err := s.libCall(method, params)
		if err == nil && !fromLibrary {
			s.check(method, r)
		}
		return r, err
	}
	rc := s.raw
	if conn == "raw2" {
		rc = s.raw2
	}
	var files []*os.File
	var ints []int
	if fds != nil {
		var err error
		if files, err = fds(s); err != nil {
			return nil, err
		}
		for _, f := range files {
			ints = append(ints, int(f.Fd()))
		}
	}
	r, err := rc.call(method, params, ints)
	for _, f := range files {
		f.Close()
	}
	if err == nil {
		s.check(method, r)
	}
	return r, err
}

// expect wants the reply, or the error named with the values given.
func (s *suite) expect(method string, r *reply, wantErr string, wantParams map[string]string) bool {
	if wantErr == "" {
		if r.errName != "" {
			s.failf("%s: expected a reply, got %s %s", method, r.errName, r.raw)
			return false
		}
		return true
	}
	if r.errName != wantErr {
		s.failf("%s: expected %s, got %s", method, wantErr, r.raw)
		return false
	}
	for k, want := range wantParams {
		if got := fmt.Sprint(r.obj()[k]); got != want {
			s.failf("%s: %s: %s is %q, want %q", method, wantErr, k, got, want)
			return false
		}
	}
	return true
}

// libIntrospection: the library's own helpers work against the daemon
// (GetInfo sends "parameters": null), every interface GetInfo names is
// served verbatim as checked in, and the reference parser reads it.
func libIntrospection(s *suite) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var vendor, product, version, url string
	var ifaces []string
	if err := s.lib.GetInfo(ctx, &vendor, &product, &version, &url, &ifaces); err != nil {
		return fmt.Errorf("the library's GetInfo() fails: %v", err)
	}
	if vendor != "rdmamemd" || version == "" {
		return fmt.Errorf("GetInfo: vendor %q version %q", vendor, version)
	}
	if len(ifaces) != len(s.schema.ifaces) {
		return fmt.Errorf("GetInfo names interfaces %v; the IDL files are %v", ifaces, sortedKeys(s.schema.ifaces))
	}
	for _, name := range ifaces {
		ifc := s.schema.ifaces[name]
		if ifc == nil {
			return fmt.Errorf("GetInfo names %s, which has no interface file", name)
		}
		desc, err := s.lib.GetInterfaceDescription(ctx, name)
		if err != nil {
			return fmt.Errorf("the library's GetInterfaceDescription(%s) fails: %v", name, err)
		}
		if desc != ifc.text {
			return fmt.Errorf("GetInterfaceDescription(%s) differs from the checked-in file", name)
		}
		if _, err := parseInterface(desc); err != nil {
			return fmt.Errorf("the reference parser refuses the served %s: %v", name, err)
		}
	}
	return nil
}

// The library decodes org.varlink.service's errors into its own types:
// they must carry what it expects.
func libDecodesServiceErrors(s *suite) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var out json.RawMessage
	err := s.lib.Call(ctx, "io.rdmamemd.Ping", map[string]interface{}{"bogus": 1}, &out)
	if e, ok := err.(*varlink.InvalidParameter); !ok || e.Parameter != "bogus" {
		return fmt.Errorf("the library decodes %#v, want InvalidParameter{bogus}", err)
	}
	err = s.lib.Call(ctx, "io.rdmamemd.Nope", nil, &out)
	if e, ok := err.(*varlink.MethodNotFound); !ok || e.Method != "io.rdmamemd.Nope" {
		return fmt.Errorf("the library decodes %#v, want MethodNotFound{io.rdmamemd.Nope}", err)
	}
	return nil
}

func invalidMessage(s *suite) error {
	if err := s.raw.sendBytes([]byte("this is not JSON\x00"), nil); err != nil {
		return err
	}
	r, err := s.raw.recv()
	if err != nil {
		return err
	}
	s.check("(not JSON)", r)
	if !s.expect("(not JSON)", r, "io.rdmamemd.InvalidMessage", nil) {
		return nil
	}
	// The framing keeps both sides in step: the connection goes on.
	r, err = s.raw.call("io.rdmamemd.Ping", nil, nil)
	if err == nil {
		s.check("io.rdmamemd.Ping", r)
		s.expect("io.rdmamemd.Ping", r, "", nil)
	}
	return err
}

func messageTooLarge(s *suite) error {
	rc, err := dialRaw(s.main.socket)
	if err != nil {
		return err
	}
	defer rc.Close()
	// One byte over the limit, and no terminator: the daemon has read it
	// all when it answers, so its close resets nothing unread.
	head := `{"method":"io.rdmamemd.Ping","parameters":{"data":"`
	msg := append([]byte(head), bytes.Repeat([]byte("a"), 16<<20+1-len(head))...)
	if err := rc.sendBytes(msg, nil); err != nil {
		return err
	}
	r, err := rc.recv()
	if err != nil {
		return err
	}
	s.check("(16 MiB + 1)", r)
	if s.expect("(16 MiB + 1)", r, "io.rdmamemd.MessageTooLarge", nil) {
		return rc.expectEOF()
	}
	return nil
}

// permissionDenied: as root, another uid asks for root's region; as
// anyone else, RetryRegistration (root's) is refused.
func permissionDenied(s *suite) error {
	if os.Geteuid() != 0 {
		r, err := s.raw.call("io.rdmamemd.RetryRegistration",
			map[string]interface{}{"region": s.v["A"], "device": "nosuchdev0"}, nil)
		if err != nil {
			return err
		}
		s.check("io.rdmamemd.RetryRegistration", r)
		s.expect("io.rdmamemd.RetryRegistration", r, "io.rdmamemd.PermissionDenied", nil)
		return nil
	}
	rc, err := dialAs(s.main.socket, 65534, 65534)
	if err != nil {
		return fmt.Errorf("cannot connect as uid 65534: %v", err)
	}
	defer rc.Close()
	r, err := rc.call("io.rdmamemd.GetRegion", map[string]interface{}{"region": s.v["B"]}, nil)
	if err != nil {
		return err
	}
	s.check("io.rdmamemd.GetRegion", r)
	s.expect("io.rdmamemd.GetRegion", r, "io.rdmamemd.PermissionDenied", nil)
	return nil
}

// learnDevice keeps the first device with an active port, and a GID of it,
// for ConnectQueuePair.
func learnDevice(s *suite, r *reply) error {
	devs, _ := r.obj()["devices"].([]interface{})
	for _, d := range devs {
		dev, _ := d.(map[string]interface{})
		ports, _ := dev["ports"].([]interface{})
		for _, p := range ports {
			port, _ := p.(map[string]interface{})
			gids, _ := port["gids"].([]interface{})
			if port["state"] != "ACTIVE" || len(gids) == 0 {
				continue
			}
			g, _ := gids[len(gids)-1].(map[string]interface{})
			s.v["device"], _ = dev["name"].(string)
			s.v["gid"], _ = g["gid"].(string)
			return nil
		}
	}
	if s.requireRDMA {
		return fmt.Errorf("-require-rdma, but ListDevices shows no device with an active port: %s", r.raw)
	}
	return nil
}

// registeredEverywhere: with devices there, every registration is in force
// and says how (the fields the IDL leaves optional for other states).
func registeredEverywhere(s *suite, r *reply) error {
	regs, _ := r.obj()["registrations"].([]interface{})
	if s.v["device"] != "" && len(regs) == 0 {
		return fmt.Errorf("RegisterOn \"all\" registered nowhere: %s", r.raw)
	}
	for _, x := range regs {
		m, _ := x.(map[string]interface{})
		for _, f := range []string{"backend", "lkey", "rkey", "addr", "length", "access", "via"} {
			if m["state"] == "registered" && m[f] == nil {
				return fmt.Errorf("a registration in force lacks %s: %s", f, r.raw)
			}
		}
	}
	return nil
}

// limitAndShutdown runs a daemon of its own with room for three connections
// of a uid: the fourth's call is refused with TooManyConnections. Then the
// first holds an exclusive lease, the second asks for one (and waits) with a
// Ping queued behind; on SIGTERM the waiting call is answered and the queued
// one gets ShuttingDown.
func limitAndShutdown(s *suite) error {
	d, err := startDaemon(s.bin, "aux", "--max-connections-per-uid", "3")
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			d.stop(true)
		}
	}()
	var conns [3]*rawConn
	for i := range conns {
		if conns[i], err = dialRaw(d.socket); err != nil {
			return err
		}
		defer conns[i].Close()
		// The answer says the daemon has counted this connection.
		r, err := conns[i].call("io.rdmamemd.Ping", nil, nil)
		if err != nil {
			return err
		}
		s.check("io.rdmamemd.Ping", r)
	}
	over, err := dialRaw(d.socket)
	if err != nil {
		return err
	}
	defer over.Close()
	r, err := over.call("io.rdmamemd.Ping", nil, nil)
	if err != nil {
		return fmt.Errorf("the fourth connection: %v", err)
	}
	s.check("io.rdmamemd.Ping", r)
	if !s.expect("io.rdmamemd.Ping", r, "io.rdmamemd.TooManyConnections", nil) {
		return nil
	}
	if err := over.expectEOF(); err != nil {
		return fmt.Errorf("after TooManyConnections: %v", err)
	}

	a, b, watch := conns[0], conns[1], conns[2]
	f, err := newMemfd(4096, nil, true)
	if err != nil {
		return err
	}
	r, err = a.call("io.rdmamemd.Register", map[string]interface{}{"fd": 0}, []int{int(f.Fd())})
	f.Close()
	if err != nil {
		return err
	}
	s.check("io.rdmamemd.Register", r)
	if !s.expect("io.rdmamemd.Register", r, "", nil) {
		return nil
	}
	region := r.str("region")
	r, err = a.call("io.rdmamemd.Lock", map[string]interface{}{"region": region, "mode": "exclusive"}, nil)
	if err != nil {
		return err
	}
	s.check("io.rdmamemd.Lock", r)
	if !s.expect("io.rdmamemd.Lock", r, "", nil) {
		return nil
	}
	// Both calls in one write: the Ping waits behind the Lock.
	both := append(callText("io.rdmamemd.Lock", map[string]interface{}{"region": region, "mode": "exclusive"}),
		callText("io.rdmamemd.Ping", nil)...)
	if err := b.sendBytes(both, nil); err != nil {
		return err
	}
	for deadline := time.Now().Add(callTimeout); ; {
		r, err = watch.call("io.rdmamemd.GetRegion", map[string]interface{}{"region": region}, nil)
		if err != nil {
			return err
		}
		s.check("io.rdmamemd.GetRegion", r)
		lock, _ := r.obj()["lock"].(map[string]interface{})
		if n, _ := lock["waiters"].(json.Number); n == "1" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the second Lock never queued: %s", r.raw)
		}
		time.Sleep(5 * time.Millisecond)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	// The first connection goes with the drain, and its lease with it.
	r, err = b.recv()
	if err != nil {
		return fmt.Errorf("the waiting Lock after SIGTERM: %v", err)
	}
	s.check("io.rdmamemd.Lock", r)
	s.expect("io.rdmamemd.Lock", r, "", nil)
	r, err = b.recv()
	if err != nil {
		return fmt.Errorf("the queued Ping after SIGTERM: %v", err)
	}
	s.check("io.rdmamemd.Ping", r)
	s.expect("io.rdmamemd.Ping", r, "io.rdmamemd.ShuttingDown", nil)
	stopped = true
	return d.stop(false)
}
