// SPDX-License-Identifier: BSD-3-Clause

// The interface definitions, parsed by the reference Go library's IDL parser,
// and a checker that holds a reply's or an error's parameters against their
// declaration: every non-optional field present with its declared type, no
// field the IDL does not declare, nested types, arrays, maps and optionals
// followed all the way down.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/varlink/go/varlink/idl"
)

type iface struct {
	name    string
	text    string
	aliases map[string]*idl.Type
}

type methodDecl struct {
	iface *iface
	in    *idl.Type
	out   *idl.Type
}

type errorDecl struct {
	iface *iface
	typ   *idl.Type // nil: no parameters
}

type schema struct {
	ifaces  map[string]*iface
	methods map[string]*methodDecl // by full name, "io.rdmamemd.Ping"
	errors  map[string]*errorDecl  // by full name
}

// parseInterface runs the reference parser over one interface description.
func parseInterface(text string) (*idl.IDL, error) {
	return idl.New(text)
}

func loadSchema(paths []string) (*schema, error) {
	s := &schema{
		ifaces:  map[string]*iface{},
		methods: map[string]*methodDecl{},
		errors:  map[string]*errorDecl{},
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		parsed, err := parseInterface(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: the reference IDL parser refuses it: %v", p, err)
		}
		ifc := &iface{name: parsed.Name, text: string(b), aliases: map[string]*idl.Type{}}
		for _, a := range parsed.Aliases {
			ifc.aliases[a.Name] = a.Type
		}
		for _, m := range parsed.Methods {
			s.methods[ifc.name+"."+m.Name] = &methodDecl{iface: ifc, in: m.In, out: m.Out}
		}
		for _, e := range parsed.Errors {
			s.errors[ifc.name+"."+e.Name] = &errorDecl{iface: ifc, typ: e.Type}
		}
		s.ifaces[ifc.name] = ifc
	}
	return s, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var (
	intRE     = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
	decimalRE = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)
)

// Fields that hold 64-bit quantities, which travel as decimal strings
// (PROTOCOL.md, "64-bit values"): by name, as the IDL's comments and
// PROTOCOL.md name them across all types. Map values inherit the map's name.
var decimalNames = map[string]bool{
	"region": true, "size": true, "length": true, "offset": true, "lease": true,
	"id": true, "connection": true, "calls": true, "errors": true,
	"lkey": true, "rkey": true, "addr": true, "file_size": true,
	"allocation_size": true, "memory": true, "mrs": true, "max_mr_size": true,
	"rejected_connections": true, "limit": true, "used": true, "requested": true,
	"regions_registered": true, "pinned_bytes_peak": true,
}

func isDecimalField(name string) bool {
	return decimalNames[name] || strings.HasSuffix(name, "_msec") ||
		strings.HasSuffix(name, "_bytes") || strings.HasPrefix(name, "bytes_") ||
		strings.HasPrefix(name, "rdma_")
}

func describe(v interface{}) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a bool"
	case json.Number:
		return "the number " + string(x)
	case string:
		return "the string " + strconv.Quote(x)
	case []interface{}:
		return "an array"
	case map[string]interface{}:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// checker collects every way one value differs from its declaration.
type checker struct {
	iface    *iface
	problems []string
}

func (c *checker) fail(path, format string, args ...interface{}) {
	c.problems = append(c.problems, path+": "+fmt.Sprintf(format, args...))
}

// value checks v (decoded with UseNumber) against t; field is the name the
// value is known by, for the decimal-string rule.
func (c *checker) value(t *idl.Type, v interface{}, path, field string) {
	switch t.Kind {
	case idl.TypeMaybe:
		if v != nil {
			c.value(t.ElementType, v, path, field)
		}
	case idl.TypeBool:
		if _, ok := v.(bool); !ok {
			c.fail(path, "declared bool, got %s", describe(v))
		}
	case idl.TypeInt:
		if n, ok := v.(json.Number); !ok || !intRE.MatchString(string(n)) {
			c.fail(path, "declared int, got %s", describe(v))
		}
	case idl.TypeFloat:
		if _, ok := v.(json.Number); !ok {
			c.fail(path, "declared float, got %s", describe(v))
		}
	case idl.TypeString:
		s, ok := v.(string)
		if !ok {
			c.fail(path, "declared string, got %s", describe(v))
		} else if isDecimalField(field) && !decimalRE.MatchString(s) &&
			!(field == "memlock_limit" && s == "infinity") {
			c.fail(path, "a 64-bit value must be a decimal string, got %q", s)
		}
	case idl.TypeObject:
		if v == nil {
			c.fail(path, "declared object, got null")
		}
	case idl.TypeArray:
		a, ok := v.([]interface{})
		if !ok {
			c.fail(path, "declared array, got %s", describe(v))
			return
		}
		for i, e := range a {
			c.value(t.ElementType, e, fmt.Sprintf("%s[%d]", path, i), field)
		}
	case idl.TypeMap:
		m, ok := v.(map[string]interface{})
		if !ok {
			c.fail(path, "declared map, got %s", describe(v))
			return
		}
		for _, k := range sortedKeys(m) {
			c.value(t.ElementType, m[k], path+"["+strconv.Quote(k)+"]", field)
		}
	case idl.TypeStruct:
		m, ok := v.(map[string]interface{})
		if !ok {
			c.fail(path, "declared object, got %s", describe(v))
			return
		}
		declared := map[string]bool{}
		for _, f := range t.Fields {
			declared[f.Name] = true
			fv, present := m[f.Name]
			if !present && f.Type.Kind != idl.TypeMaybe {
				c.fail(path+"."+f.Name, "missing, and not optional")
				continue
			}
			if present {
				c.value(f.Type, fv, path+"."+f.Name, f.Name)
			}
		}
		for _, k := range sortedKeys(m) {
			if !declared[k] {
				c.fail(path+"."+k, "not declared (value %s)", describe(m[k]))
			}
		}
	case idl.TypeEnum:
		s, ok := v.(string)
		if ok {
			for _, f := range t.Fields {
				if f.Name == s {
					return
				}
			}
		}
		c.fail(path, "not one of the enum's names: %s", describe(v))
	case idl.TypeAlias:
		a := c.iface.aliases[t.Alias]
		if a == nil {
			c.fail(path, "type %s is not declared in %s", t.Alias, c.iface.name)
			return
		}
		c.value(a, v, path, field)
	default:
		c.fail(path, "unknown type kind %d", t.Kind)
	}
}

// checkParams holds parameters (nil: absent) against a declared struct type.
func (s *schema) checkParams(ifc *iface, t *idl.Type, params interface{}, path string) []string {
	c := &checker{iface: ifc}
	if params == nil {
		params = map[string]interface{}{}
	}
	if t == nil {
		t = &idl.Type{Kind: idl.TypeStruct}
	}
	c.value(t, params, path, "")
	return c.problems
}
