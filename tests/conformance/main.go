// SPDX-License-Identifier: BSD-3-Clause

// Varlink conformance of rdmamemd, checked with the reference Go library
// (Debian's golang-github-varlink-go-dev): its IDL parser must accept both
// interface files and what GetInterfaceDescription serves, its client must
// be able to call every method, and every reply and every error a real
// daemon sends must match its declaration in the IDL exactly. The cases are
// in cases.go; a method or error the IDL declares without a case (or an
// explicit skip with its reason) fails the run.
//
//	conformance -daemon build/release/rdmamemd -proto proto [-require-rdma] [-v]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/varlink/go/varlink"
)

type suite struct {
	schema      *schema
	bin         string
	verbose     bool
	requireRDMA bool

	replies  int               // replies checked against the IDL
	provoked int               // error replies checked against the IDL
	methods  map[string]int    // method -> replies checked
	errs     map[string]int    // error -> times seen and checked
	skipM    map[string]string // method -> why no reply could be checked here
	skipE    map[string]string // error -> why it was not provoked here
	failures []string
	current  string // the case running, for messages

	main *daemon
	lib  *varlink.Connection
	raw  *rawConn
	raw2 *rawConn
	v    map[string]string // what earlier cases learnt: region ids, leases, tokens
	open []*os.File        // closed at the end
}

func (s *suite) failf(format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	if s.current != "" {
		msg = s.current + ": " + msg
	}
	s.failures = append(s.failures, msg)
	fmt.Fprintf(os.Stderr, "conformance: FAIL: %s\n", msg)
}

// check holds one message from the daemon against the IDL: the reply of
// method, or the error it names.
func (s *suite) check(method string, r *reply) {
	for k, v := range r.envelope {
		switch k {
		case "parameters", "error":
		case "continues":
			if v != false {
				s.failf("%s: \"continues\" set, but no call asked for more: %s", method, r.raw)
			}
		default:
			s.failf("%s: the reply has a field Varlink does not define: %q", method, k)
		}
	}
	if r.params != nil {
		if _, ok := r.params.(map[string]interface{}); !ok {
			s.failf("%s: \"parameters\" is not an object: %s", method, r.raw)
			return
		}
	}
	if r.errName != "" {
		decl := s.schema.errors[r.errName]
		if decl == nil {
			s.failf("%s answered error %s, which no interface declares: %s", method, r.errName, r.raw)
			return
		}
		for _, p := range s.schema.checkParams(decl.iface, decl.typ, r.params, r.errName) {
			s.failf("%s: %s (%s)", method, p, r.raw)
		}
		s.errs[r.errName]++
		s.provoked++
		return
	}
	decl := s.schema.methods[method]
	if decl == nil {
		s.failf("%s answered, but no interface declares it", method)
		return
	}
	for _, p := range s.schema.checkParams(decl.iface, decl.out, r.params, method) {
		s.failf("%s (%.400s)", p, r.raw)
	}
	s.methods[method]++
	s.replies++
}

// libCall calls through the reference library and returns the reply as it
// came. Errors it decodes into its own types (org.varlink.service's) lose
// their wire form: they come back with fromLibrary set, and the raw
// connection checks those on the wire.
func (s *suite) libCall(method string, params interface{}) (r *reply, fromLibrary bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var out json.RawMessage
	err = s.lib.Call(ctx, method, params, &out)
	var ve *varlink.Error
	switch e := err.(type) {
	case nil:
		r = &reply{raw: out, envelope: map[string]interface{}{}}
		if len(out) > 0 {
			if err := decodeJSON(out, &r.params); err != nil {
				return nil, false, err
			}
			r.envelope["parameters"] = r.params
		}
		return r, false, nil
	case *varlink.InvalidParameter:
		return &reply{errName: e.Error(), params: map[string]interface{}{"parameter": e.Parameter}}, true, nil
	case *varlink.MethodNotFound:
		return &reply{errName: e.Error(), params: map[string]interface{}{"method": e.Method}}, true, nil
	case *varlink.MethodNotImplemented:
		return &reply{errName: e.Error(), params: map[string]interface{}{"method": e.Method}}, true, nil
	case *varlink.InterfaceNotFound:
		return &reply{errName: e.Error(), params: map[string]interface{}{"interface": e.Interface}}, true, nil
	default:
		if errors.As(err, &ve) {
			r = &reply{errName: ve.Name, envelope: map[string]interface{}{"error": ve.Name}}
			if raw, ok := ve.Parameters.(*json.RawMessage); ok && raw != nil {
				r.raw = *raw
				if err := decodeJSON(*raw, &r.params); err != nil {
					return nil, false, err
				}
				r.envelope["parameters"] = r.params
			}
			return r, false, nil
		}
		return nil, false, err
	}
}

func main() {
	s := &suite{
		methods: map[string]int{},
		errs:    map[string]int{},
		skipM:   map[string]string{},
		skipE:   map[string]string{},
		v:       map[string]string{},
	}
	proto := flag.String("proto", "proto", "the directory of the .varlink files")
	flag.StringVar(&s.bin, "daemon", "build/release/rdmamemd", "the rdmamemd binary to test")
	flag.BoolVar(&s.requireRDMA, "require-rdma", false,
		"fail unless an RDMA device is there (the Soft-RoCE VM), instead of skipping the cases that need one")
	flag.BoolVar(&s.verbose, "v", false, "print every case")
	flag.Parse()

	start := time.Now()
	files := []string{filepath.Join(*proto, "io.rdmamemd.varlink"),
		filepath.Join(*proto, "org.varlink.service.varlink")}
	sch, err := loadSchema(files)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance: FAIL: %v\n", err)
		os.Exit(1)
	}
	s.schema = sch
	for _, f := range files {
		fmt.Printf("conformance: %s parses with the reference IDL parser\n", f)
	}

	s.run()
	s.report(time.Since(start))
	if len(s.failures) > 0 {
		os.Exit(1)
	}
}

func (s *suite) setup() error {
	var err error
	// Small caps where a case needs to reach them; everything else stays
	// far below.
	s.main, err = startDaemon(s.bin, "main", "--max-pinned-bytes-per-uid", "32M")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if s.lib, err = varlink.NewConnection(ctx, "unix:"+s.main.socket); err != nil {
		return err
	}
	if s.raw, err = dialRaw(s.main.socket); err != nil {
		return err
	}
	s.raw2, err = dialRaw(s.main.socket)
	return err
}

func (s *suite) teardown() {
	for _, f := range s.open {
		f.Close()
	}
	if s.lib != nil {
		s.lib.Close()
	}
	if s.raw != nil {
		s.raw.Close()
	}
	if s.raw2 != nil {
		s.raw2.Close()
	}
	if s.main != nil {
		s.current = "main daemon"
		if err := s.main.stop(true); err != nil {
			s.failf("%v", err)
		}
	}
}

func (s *suite) run() {
	if err := s.setup(); err != nil {
		s.failf("cannot start the daemon under test: %v", err)
		s.teardown()
		return
	}
	for _, c := range cases {
		s.current = c.what
		if s.verbose {
			fmt.Printf("conformance: case: %s\n", c.what)
		}
		s.runCase(c)
	}
	s.current = ""
	s.teardown()
	s.current = ""
	s.coverage()
}

// coverage fails for each method or error of the IDL that no case checked
// and no case skipped with a reason: a new one needs its case.
func (s *suite) coverage() {
	for _, r := range unprovokable {
		if s.errs[r.err] == 0 {
			s.skipE[r.err] = r.why
		}
	}
	for _, m := range sortedKeys(s.schema.methods) {
		if s.methods[m] == 0 && s.skipM[m] == "" {
			s.failf("method %s is declared in the IDL but no case checks a reply of it: "+
				"add one to tests/conformance/cases.go", m)
		}
	}
	for _, e := range sortedKeys(s.schema.errors) {
		if s.errs[e] == 0 && s.skipE[e] == "" {
			s.failf("error %s is declared in the IDL but no case provokes it: add one to "+
				"tests/conformance/cases.go, or to its list of errors no client can cause", e)
		}
	}
}

func (s *suite) report(elapsed time.Duration) {
	checkedM, checkedE := 0, 0
	for m := range s.schema.methods {
		if s.methods[m] > 0 {
			checkedM++
		}
	}
	for e := range s.schema.errors {
		if s.errs[e] > 0 {
			checkedE++
		}
	}
	fmt.Printf("conformance: %d replies checked against the IDL, covering %d of %d methods\n",
		s.replies, checkedM, len(s.schema.methods))
	fmt.Printf("conformance: %d errors provoked and checked, covering %d of %d declared errors\n",
		s.provoked, checkedE, len(s.schema.errors))
	for _, m := range sortedKeys(s.skipM) {
		if s.methods[m] == 0 {
			fmt.Printf("conformance: skipped method %s: %s\n", m, s.skipM[m])
		}
	}
	for _, e := range sortedKeys(s.skipE) {
		if s.errs[e] == 0 {
			fmt.Printf("conformance: skipped error %s: %s\n", e, s.skipE[e])
		}
	}
	verdict := "PASS"
	if len(s.failures) > 0 {
		verdict = fmt.Sprintf("FAIL (%d problems)", len(s.failures))
	}
	fmt.Printf("conformance: %s in %.1f s\n", verdict, elapsed.Seconds())
}

// A case that needs what this machine lacks says why; the methods and
// errors it would have covered are then skipped with that reason, unless
// another case covers them.
func (s *suite) skip(c *testCase, why string) {
	if s.verbose {
		fmt.Printf("conformance:   skipped: %s\n", why)
	}
	if c.err != "" {
		s.skipE[c.err] = why
	} else if c.method != "" {
		s.skipM[c.method] = why
	}
	for _, m := range c.covers {
		if s.schema.errors[m] != nil {
			s.skipE[m] = why
		} else {
			s.skipM[m] = why
		}
	}
}
