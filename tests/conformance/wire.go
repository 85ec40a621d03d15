// SPDX-License-Identifier: BSD-3-Clause

// What the Go library does not do: raw Varlink over a Unix socket with file
// descriptors (SCM_RIGHTS) on the message that uses them, connections with
// another uid's credentials, memfds, and the daemons under test.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

const callTimeout = 20 * time.Second

// reply is one message from the daemon, decoded with UseNumber.
type reply struct {
	raw      []byte
	envelope map[string]interface{}
	errName  string
	params   interface{} // nil: absent
}

func decodeJSON(b []byte, v interface{}) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("text after the JSON value")
	}
	return nil
}

func parseReply(b []byte) (*reply, error) {
	r := &reply{raw: b}
	if err := decodeJSON(b, &r.envelope); err != nil {
		return nil, fmt.Errorf("reply is not a JSON object: %v: %q", err, b)
	}
	if e, ok := r.envelope["error"]; ok {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("reply's error is not a string: %q", b)
		}
		r.errName = s
	}
	r.params = r.envelope["parameters"]
	return r, nil
}

// obj returns the reply's parameters as an object (empty when absent).
func (r *reply) obj() map[string]interface{} {
	if m, ok := r.params.(map[string]interface{}); ok {
		return m
	}
	return map[string]interface{}{}
}

func (r *reply) str(name string) string {
	s, _ := r.obj()[name].(string)
	return s
}

// rawConn speaks Varlink itself, byte for byte.
type rawConn struct {
	c *net.UnixConn
	r *bufio.Reader
}

func newRawConn(c *net.UnixConn) *rawConn {
	return &rawConn{c: c, r: bufio.NewReader(c)}
}

func dialRaw(path string) (*rawConn, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	return newRawConn(c), nil
}

func (rc *rawConn) Close() { rc.c.Close() }

// sendBytes writes b; the fds ride on the sendmsg() that carries its first
// byte (PROTOCOL.md, "File descriptors").
func (rc *rawConn) sendBytes(b []byte, fds []int) error {
	rc.c.SetWriteDeadline(time.Now().Add(callTimeout))
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	for len(b) > 0 {
		n, _, err := rc.c.WriteMsgUnix(b, oob, nil)
		if err != nil {
			return err
		}
		b = b[n:]
		oob = nil
	}
	return nil
}

func callText(method string, params interface{}) []byte {
	call := map[string]interface{}{"method": method}
	if params != nil {
		call["parameters"] = params
	}
	b, err := json.Marshal(call)
	if err != nil {
		panic(err)
	}
	return append(b, 0)
}

func (rc *rawConn) recv() (*reply, error) {
	rc.c.SetReadDeadline(time.Now().Add(callTimeout))
	b, err := rc.r.ReadBytes(0)
	if err != nil {
		return nil, err
	}
	return parseReply(b[:len(b)-1])
}

// expectEOF waits for the daemon to close the connection.
func (rc *rawConn) expectEOF() error {
	rc.c.SetReadDeadline(time.Now().Add(callTimeout))
	b, err := rc.r.ReadBytes(0)
	if err == nil {
		return fmt.Errorf("another message instead of the end of the connection: %q", b)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("the daemon kept the connection open")
	}
	return nil
}

func (rc *rawConn) call(method string, params interface{}, fds []int) (*reply, error) {
	if err := rc.sendBytes(callText(method, params), fds); err != nil {
		return nil, err
	}
	return rc.recv()
}

// dialAs connects with another uid's and gid's credentials, which the
// daemon reads with SO_PEERCRED: only the connecting thread changes its
// ids, with raw system calls (Go's own setters change every thread), and
// the thread is thrown away after, since its goroutine exits locked.
func dialAs(path string, uid, gid int) (*rawConn, error) {
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		fail := func(what string, e syscall.Errno) {
			done <- result{-1, fmt.Errorf("%s: %v", what, e)}
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			fail("setgroups", e)
			return
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, ^uintptr(0), uintptr(gid), ^uintptr(0)); e != 0 {
			fail("setresgid", e)
			return
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
			fail("setresuid", e)
			return
		}
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err == nil {
			err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: path})
			if err != nil {
				syscall.Close(fd)
			}
		}
		done <- result{fd, err}
		// Returning without UnlockOSThread ends the thread.
	}()
	res := <-done
	if res.err != nil {
		return nil, res.err
	}
	f := os.NewFile(uintptr(res.fd), "as-other-uid")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	return newRawConn(c.(*net.UnixConn)), nil
}

// memfd_create(2) has no wrapper in the syscall package.
var sysMemfdCreate = map[string]uintptr{"amd64": 319, "arm64": 279, "386": 356, "riscv64": 279,
	"ppc64le": 360, "s390x": 350}

const (
	mfdCloexec      = 0x1
	mfdAllowSealing = 0x2
	fAddSeals       = 1033
	fSealSeal       = 0x1
	fSealShrink     = 0x2
	fSealGrow       = 0x4
)

// newMemfd makes a memfd of size bytes, filled with pattern (sparse when
// pattern is empty), sealed against shrinking and growing when sealed.
func newMemfd(size int64, pattern []byte, sealed bool) (*os.File, error) {
	nr, ok := sysMemfdCreate[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("memfd_create: unknown system call number on %s", runtime.GOARCH)
	}
	name := []byte("conformance\x00")
	fd, _, e := syscall.Syscall(nr, uintptr(unsafe.Pointer(&name[0])), mfdCloexec|mfdAllowSealing, 0)
	runtime.KeepAlive(name)
	if e != 0 {
		return nil, fmt.Errorf("memfd_create: %v", e)
	}
	f := os.NewFile(fd, "memfd")
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, err
	}
	if len(pattern) > 0 {
		buf := bytes.Repeat(pattern, int(size)/len(pattern)+1)[:size]
		if _, err := f.WriteAt(buf, 0); err != nil {
			f.Close()
			return nil, err
		}
	}
	if sealed {
		if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, fAddSeals,
			fSealShrink|fSealGrow|fSealSeal); e != 0 {
			f.Close()
			return nil, fmt.Errorf("F_ADD_SEALS: %v", e)
		}
	}
	return f, nil
}

// reopenReadOnly opens the same memfd again, read-only.
func reopenReadOnly(f *os.File) (*os.File, error) {
	return os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), os.O_RDONLY|syscall.O_CLOEXEC, 0)
}

// daemon is one rdmamemd under test.
type daemon struct {
	cmd    *exec.Cmd
	dir    string
	socket string
	exited chan error
}

// startDaemon starts bin on a socket of its own and waits for READY=1 on a
// notify socket, as systemd would. RDMAMEM_TEST_DAEMON_WRAPPER ("valgrind
// ...") runs it under a tool, as the C suites do.
func startDaemon(bin, name string, extra ...string) (*daemon, error) {
	dir, err := os.MkdirTemp("", "rdmamemd-conformance.")
	if err != nil {
		return nil, err
	}
	// Another uid connects too (PermissionDenied): the directory must let
	// it through, and the socket mode below lets it connect.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	d := &daemon{dir: dir, socket: filepath.Join(dir, name+".sock"), exited: make(chan error, 1)}
	notifyPath := filepath.Join(dir, "notify")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		return nil, err
	}
	defer notify.Close()

	level := os.Getenv("RDMAMEM_TEST_LOG")
	if level == "" {
		// Quiet: the cases provoke failures the daemon warns of.
		level = "error"
	}
	// A small bandwidth probe: under a sanitizer in the 1 GiB VM the
	// default one's buffers and their shadow do not fit.
	args := []string{bin, "--socket", d.socket, "--socket-mode", "0666", "--log-level", level,
		"--bandwidth-probe-size=4M"}
	args = append(args, extra...)
	if w := strings.Fields(os.Getenv("RDMAMEM_TEST_DAEMON_WRAPPER")); len(w) > 0 {
		args = append(w, args...)
	}
	d.cmd = exec.Command(args[0], args[1:]...)
	d.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notifyPath)
	d.cmd.Stdout = os.Stdout
	d.cmd.Stderr = os.Stderr
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { d.exited <- d.cmd.Wait() }()

	buf := make([]byte, 4096)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		notify.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, _, err := notify.ReadFromUnix(buf)
		if err == nil && bytes.Contains(buf[:n], []byte("READY=1")) {
			return d, nil
		}
		select {
		case err := <-d.exited:
			d.exited <- err
			return nil, fmt.Errorf("%s exited before it was ready: %v", bin, err)
		default:
		}
	}
	d.cmd.Process.Kill()
	return nil, fmt.Errorf("%s did not become ready in time", bin)
}

// stop sends SIGTERM (unless sent already) and wants exit status 0: a
// sanitizer's report, a leak or a crash is a failure.
func (d *daemon) stop(signal bool) error {
	defer os.RemoveAll(d.dir)
	if signal {
		d.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case err := <-d.exited:
		if err != nil {
			return fmt.Errorf("the daemon exited with %v", err)
		}
		return nil
	case <-time.After(60 * time.Second):
		d.cmd.Process.Kill()
		return fmt.Errorf("the daemon did not exit within 60 s of SIGTERM")
	}
}

// Huge page sizes a hugetlb memfd may ask for (MFD_HUGE_2MB, MFD_HUGE_1GB:
// the size's log2 in bits 26 and up), with their sysfs directories.
var hugePageSizes = []struct {
	flag uintptr
	size int64
	dir  string
}{
	{21 << 26, 2 << 20, "hugepages-2048kB"},
	{30 << 26, 1 << 30, "hugepages-1048576kB"},
}

const mfdHugetlb = 0x4

// hugePagesAvailable: free huge pages in dir that no mapping reserved; -1
// when the host has no such size.
func hugePagesAvailable(dir string) int64 {
	read := func(name string) int64 {
		b, err := os.ReadFile("/sys/kernel/mm/hugepages/" + dir + "/" + name)
		if err != nil {
			return -1
		}
		var n int64
		if _, err := fmt.Sscan(string(b), &n); err != nil {
			return -1
		}
		return n
	}
	free, resv := read("free_hugepages"), read("resv_hugepages")
	if free < 0 || resv < 0 {
		return -1
	}
	return free - resv
}

// A huge page size of which the host has none to give, or -1.
func hugePageSizeWithNone() int {
	for i, h := range hugePageSizes {
		if hugePagesAvailable(h.dir) == 0 {
			return i
		}
	}
	return -1
}

func needNoHugePages(s *suite) string {
	if hugePageSizeWithNone() < 0 {
		return "every huge page size this host has still has free pages: the daemon could map a hugetlb memfd"
	}
	return ""
}

// hugetlbMemfd: one huge page of a size the host has none of. Creating and
// sizing it needs no page; mapping it does.
func hugetlbMemfd(s *suite) ([]*os.File, error) {
	i := hugePageSizeWithNone()
	if i < 0 {
		return nil, fmt.Errorf("no huge page size without free pages")
	}
	h := hugePageSizes[i]
	nr := sysMemfdCreate[runtime.GOARCH]
	name := []byte("conformance-huge\x00")
	fd, _, e := syscall.Syscall(nr, uintptr(unsafe.Pointer(&name[0])),
		mfdCloexec|mfdAllowSealing|mfdHugetlb|h.flag, 0)
	runtime.KeepAlive(name)
	if e != 0 {
		return nil, fmt.Errorf("memfd_create(MFD_HUGETLB, %s): %v", h.dir, e)
	}
	f := os.NewFile(fd, "hugetlb memfd")
	if err := f.Truncate(h.size); err != nil {
		f.Close()
		return nil, err
	}
	if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, fAddSeals, fSealShrink|fSealGrow); e != 0 {
		f.Close()
		return nil, fmt.Errorf("F_ADD_SEALS: %v", e)
	}
	return []*os.File{f}, nil
}
