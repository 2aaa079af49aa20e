package terraform_test

// A small evaluator for this terraform module, so the tests can check the
// configuration against the code without terraform or any provider: it
// parses the .tf files with hcl, takes variable defaults (plus the test's
// inputs), evaluates locals, data sources and resources in dependency
// order (expanding for_each and dynamic blocks), and stands in for the
// providers with plausible values for the few computed attributes the
// module reads (a service account's email, a function's URLs, ...). Any
// expression that does not evaluate is an error, so the harness also does
// a little of `terraform validate`'s job. Variable validations, resource
// preconditions and postconditions are evaluated and must hold.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"sigs.k8s.io/yaml"
)

// module is a parsed and evaluated terraform module.
type module struct {
	dir       string
	files     map[string][]byte
	bodies    map[string]*hclsyntax.Body
	variables map[string]*hclsyntax.Block
	locals    map[string]*hclsyntax.Attribute
	outputs   map[string]*hclsyntax.Block
	resources map[string]*resource // "type.name" and "data.type.name"
	order     []string             // resource keys in file order

	deps map[string][]string // node -> the nodes it references

	vars      map[string]cty.Value
	localVals map[string]cty.Value
	outVals   map[string]cty.Value
	errs      []string
}

// resource is one resource or data block and its instances.
type resource struct {
	Mode, Type, Name string // Mode is "resource" or "data"
	Block            *hclsyntax.Block
	File             string
	Instances        map[string]*instance // "" when there is no for_each/count
	value            cty.Value
}

func (r *resource) key() string {
	if r.Mode == "data" {
		return "data." + r.Type + "." + r.Name
	}
	return r.Type + "." + r.Name
}

// instance is one evaluated instance of a resource.
type instance struct {
	Res    *resource
	Key    string
	Attrs  map[string]cty.Value
	Blocks map[string][]*block
	Value  cty.Value // what references see
	ctx    *hcl.EvalContext
}

func (i *instance) addr() string {
	if i.Key == "" {
		return i.Res.key()
	}
	return fmt.Sprintf("%s[%q]", i.Res.key(), i.Key)
}

// block is an evaluated nested block (dynamic blocks expanded).
type block struct {
	Type   string
	Attrs  map[string]cty.Value
	Blocks map[string][]*block
	Body   *hclsyntax.Body
}

func (b *block) str(name string) string    { return asString(b.Attrs[name]) }
func (i *instance) str(name string) string { return asString(i.Attrs[name]) }

func (b *block) one(name string) *block {
	if bs := b.Blocks[name]; len(bs) == 1 {
		return bs[0]
	}
	return nil
}

func (i *instance) one(name string) *block {
	if bs := i.Blocks[name]; len(bs) == 1 {
		return bs[0]
	}
	return nil
}

func asString(v cty.Value) string {
	if v == cty.NilVal || v.IsNull() || !v.IsKnown() {
		return ""
	}
	s, err := convert.Convert(v, cty.String)
	if err != nil {
		return ""
	}
	return s.AsString()
}

func stringMap(v cty.Value) map[string]string {
	out := map[string]string{}
	if v == cty.NilVal || v.IsNull() || !v.IsKnown() || !v.CanIterateElements() {
		return out
	}
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		out[asString(k)] = asString(e)
	}
	return out
}

func (m *module) errorf(format string, args ...any) {
	m.errs = append(m.errs, fmt.Sprintf(format, args...))
}

func (m *module) diag(where string, diags hcl.Diagnostics) bool {
	if !diags.HasErrors() {
		return false
	}
	m.errorf("%s: %s", where, diags.Error())
	return true
}

// loadModule parses every .tf file of dir and evaluates the module with the
// given variable values (the others take their defaults).
func loadModule(dir string, inputs map[string]cty.Value) (*module, error) {
	m := &module{
		dir: dir, files: map[string][]byte{}, bodies: map[string]*hclsyntax.Body{},
		variables: map[string]*hclsyntax.Block{}, locals: map[string]*hclsyntax.Attribute{},
		outputs: map[string]*hclsyntax.Block{}, resources: map[string]*resource{},
		vars: map[string]cty.Value{}, localVals: map[string]cty.Value{}, outVals: map[string]cty.Value{},
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	p := hclparse.NewParser()
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, diags := p.ParseHCL(src, name)
		if diags.HasErrors() {
			return nil, diags
		}
		base := filepath.Base(name)
		m.files[base] = src
		body := f.Body.(*hclsyntax.Body)
		m.bodies[base] = body
		for name, a := range body.Attributes {
			m.errorf("%s: unexpected top-level attribute %s", base, name)
			_ = a
		}
		for _, b := range body.Blocks {
			switch b.Type {
			case "terraform", "provider", "check", "moved", "import", "removed":
			case "variable":
				m.variables[b.Labels[0]] = b
			case "output":
				m.outputs[b.Labels[0]] = b
			case "locals":
				for name, a := range b.Body.Attributes {
					if _, dup := m.locals[name]; dup {
						m.errorf("%s: local.%s is defined twice", base, name)
					}
					m.locals[name] = a
				}
			case "resource", "data":
				r := &resource{Mode: b.Type, Type: b.Labels[0], Name: b.Labels[1], Block: b, File: base}
				if _, dup := m.resources[r.key()]; dup {
					m.errorf("%s: %s is defined twice", base, r.key())
				}
				m.resources[r.key()] = r
				m.order = append(m.order, r.key())
			default:
				m.errorf("%s: unknown block type %s", base, b.Type)
			}
		}
	}
	m.evalVariables(inputs)
	m.evaluate()
	return m, nil
}

func (m *module) evalVariables(inputs map[string]cty.Value) {
	for name := range inputs {
		if _, ok := m.variables[name]; !ok {
			m.errorf("input %s is not a variable of the module", name)
		}
	}
	for name, b := range m.variables {
		ty, defaults := cty.DynamicPseudoType, (*typeexpr.Defaults)(nil)
		if a, ok := b.Body.Attributes["type"]; ok {
			var diags hcl.Diagnostics
			ty, defaults, diags = typeexpr.TypeConstraintWithDefaults(a.Expr)
			if m.diag("variable "+name+" type", diags) {
				continue
			}
		}
		val, ok := inputs[name]
		if !ok {
			a, has := b.Body.Attributes["default"]
			if !has {
				m.errorf("variable %s is required and the test gives no value", name)
				continue
			}
			var diags hcl.Diagnostics
			val, diags = a.Expr.Value(nil)
			if m.diag("variable "+name+" default", diags) {
				continue
			}
		}
		if defaults != nil {
			val = defaults.Apply(val)
		}
		cv, err := convert.Convert(val, ty)
		if err != nil {
			m.errorf("variable %s: value does not have its type: %v", name, err)
			continue
		}
		m.vars[name] = cv
	}
}

// node names what an expression depends on: "local.x", "type.name",
// "data.type.name".
func nodeOf(t hcl.Traversal) string {
	root := t.RootName()
	attr := func(i int) string {
		if len(t) > i {
			if a, ok := t[i].(hcl.TraverseAttr); ok {
				return a.Name
			}
		}
		return ""
	}
	switch root {
	case "var", "path", "each", "count", "self", "terraform":
		return ""
	case "local":
		return "local." + attr(1)
	case "data":
		return "data." + attr(1) + "." + attr(2)
	}
	return root + "." + attr(1)
}

func bodyTraversals(b *hclsyntax.Body) []hcl.Traversal {
	var out []hcl.Traversal
	for _, a := range b.Attributes {
		out = append(out, hclsyntax.Variables(a.Expr)...)
	}
	for _, nb := range b.Blocks {
		out = append(out, bodyTraversals(nb.Body)...)
	}
	return out
}

func (m *module) evaluate() {
	deps := map[string][]string{}
	add := func(node string, ts []hcl.Traversal) {
		for _, t := range ts {
			if d := nodeOf(t); d != "" && d != node {
				deps[node] = append(deps[node], d)
			}
		}
	}
	var nodes []string
	for name, a := range m.locals {
		n := "local." + name
		nodes = append(nodes, n)
		add(n, hclsyntax.Variables(a.Expr))
	}
	for _, k := range m.order {
		nodes = append(nodes, k)
		add(k, bodyTraversals(m.resources[k].Block.Body))
	}
	sort.Strings(nodes)
	m.deps = deps
	exists := map[string]bool{}
	for _, n := range nodes {
		exists[n] = true
	}
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(n string, path []string)
	visit = func(n string, path []string) {
		switch state[n] {
		case 1:
			m.errorf("dependency cycle: %s -> %s", strings.Join(path, " -> "), n)
			return
		case 2:
			return
		}
		state[n] = 1
		ds := append([]string(nil), deps[n]...)
		sort.Strings(ds)
		for _, d := range ds {
			if !exists[d] {
				// A for-expression or dynamic-block iterator, or a
				// reference to something undefined (the evaluation says).
				continue
			}
			visit(d, append(path, n))
		}
		state[n] = 2
		if strings.HasPrefix(n, "local.") {
			name := strings.TrimPrefix(n, "local.")
			v, diags := m.locals[name].Expr.Value(m.ctx())
			if m.diag(n, diags) {
				v = cty.DynamicVal
			}
			m.localVals[name] = v
			return
		}
		m.evalResource(m.resources[n])
	}
	for _, n := range nodes {
		visit(n, nil)
	}
	for name, b := range m.variables {
		for _, vb := range b.Body.Blocks {
			if vb.Type == "validation" {
				m.checkCondition("variable "+name+" validation", vb.Body, m.ctx())
			}
		}
	}
	for name, b := range m.outputs {
		a, ok := b.Body.Attributes["value"]
		if !ok {
			m.errorf("output %s has no value", name)
			continue
		}
		v, diags := a.Expr.Value(m.ctx())
		if !m.diag("output "+name, diags) {
			m.outVals[name] = v
		}
	}
}

func (m *module) checkCondition(where string, body *hclsyntax.Body, ctx *hcl.EvalContext) {
	c, ok := body.Attributes["condition"]
	if !ok {
		m.errorf("%s: no condition", where)
		return
	}
	v, diags := c.Expr.Value(ctx)
	if m.diag(where+" condition", diags) {
		return
	}
	if !v.IsKnown() {
		return // decided at apply time
	}
	if v.IsNull() || v.Type() != cty.Bool {
		m.errorf("%s: condition is not a bool", where)
		return
	}
	msg := ""
	if e, ok := body.Attributes["error_message"]; ok {
		mv, diags := e.Expr.Value(ctx)
		if !m.diag(where+" error_message", diags) {
			msg = asString(mv)
		}
	} else {
		m.errorf("%s: no error_message", where)
	}
	if v.False() {
		m.errorf("%s does not hold: %s", where, msg)
	}
}

// ctx is the evaluation context of the module's top level.
func (m *module) ctx() *hcl.EvalContext {
	cwd, _ := filepath.Abs(m.dir)
	vars := map[string]cty.Value{
		"var":   cty.ObjectVal(m.vars),
		"local": cty.ObjectVal(m.localVals),
		"path":  cty.ObjectVal(map[string]cty.Value{"module": cty.StringVal(m.dir), "root": cty.StringVal(m.dir), "cwd": cty.StringVal(cwd)}),
	}
	types := map[string]map[string]cty.Value{}
	data := map[string]map[string]cty.Value{}
	for _, r := range m.resources {
		if r.value == cty.NilVal {
			continue
		}
		into := types
		if r.Mode == "data" {
			into = data
		}
		if into[r.Type] == nil {
			into[r.Type] = map[string]cty.Value{}
		}
		into[r.Type][r.Name] = r.value
	}
	for t, byName := range types {
		vars[t] = cty.ObjectVal(byName)
	}
	dataVals := map[string]cty.Value{}
	for t, byName := range data {
		dataVals[t] = cty.ObjectVal(byName)
	}
	vars["data"] = cty.ObjectVal(dataVals)
	return &hcl.EvalContext{Variables: vars, Functions: m.functions()}
}

var metaArguments = map[string]bool{"for_each": true, "count": true, "depends_on": true, "provider": true}

func (m *module) evalResource(r *resource) {
	r.Instances = map[string]*instance{}
	base := m.ctx()
	keys := []string{""}
	eachVals := map[string]cty.Value{}
	var countN int
	if fe, ok := r.Block.Body.Attributes["for_each"]; ok {
		v, diags := fe.Expr.Value(base)
		if m.diag(r.key()+" for_each", diags) {
			return
		}
		if !v.IsKnown() || v.IsNull() {
			m.errorf("%s: for_each must be known at plan time", r.key())
			return
		}
		ty := v.Type()
		if !(ty.IsMapType() || ty.IsObjectType() || (ty.IsSetType() && ty.ElementType() == cty.String)) {
			m.errorf("%s: for_each must be a map or a set of strings, not %s", r.key(), ty.FriendlyName())
			return
		}
		keys = nil
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			keys = append(keys, k.AsString())
			eachVals[k.AsString()] = e
		}
	}
	if c, ok := r.Block.Body.Attributes["count"]; ok {
		v, diags := c.Expr.Value(base)
		if m.diag(r.key()+" count", diags) {
			return
		}
		bf := v.AsBigFloat()
		n, _ := bf.Int64()
		countN = int(n)
		keys = nil
		for i := 0; i < countN; i++ {
			keys = append(keys, fmt.Sprint(i))
		}
	}
	_, hasForEach := r.Block.Body.Attributes["for_each"]
	_, hasCount := r.Block.Body.Attributes["count"]
	for _, k := range keys {
		ctx := base.NewChild()
		ctx.Variables = map[string]cty.Value{}
		switch {
		case hasForEach:
			ctx.Variables["each"] = cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(k), "value": eachVals[k]})
		case hasCount:
			ctx.Variables["count"] = cty.ObjectVal(map[string]cty.Value{"index": cty.StringVal(k)})
		}
		inst := &instance{Res: r, Key: k, ctx: ctx}
		b := m.evalBody(inst.addr(), r.Block.Body, ctx)
		inst.Attrs, inst.Blocks = b.Attrs, b.Blocks
		m.synthesize(inst)
		inst.Value = instanceValue(inst)
		r.Instances[k] = inst
	}
	switch {
	case hasForEach:
		vals := map[string]cty.Value{}
		for k, i := range r.Instances {
			vals[k] = i.Value
		}
		r.value = cty.ObjectVal(vals)
	case hasCount:
		var vals []cty.Value
		for _, k := range keys {
			vals = append(vals, r.Instances[k].Value)
		}
		r.value = cty.TupleVal(vals)
	default:
		r.value = r.Instances[""].Value
	}
	// Conditions, now that self is known.
	for _, k := range keys {
		inst := r.Instances[k]
		for _, lb := range r.Block.Body.Blocks {
			if lb.Type != "lifecycle" {
				continue
			}
			for _, cb := range lb.Body.Blocks {
				ctx := inst.ctx.NewChild()
				ctx.Variables = map[string]cty.Value{}
				switch cb.Type {
				case "precondition":
				case "postcondition":
					ctx.Variables["self"] = inst.Value
				default:
					continue
				}
				m.checkCondition(inst.addr()+" "+cb.Type, cb.Body, ctx)
			}
		}
	}
}

func instanceValue(inst *instance) cty.Value {
	vals := map[string]cty.Value{}
	for k, v := range inst.Attrs {
		vals[k] = v
	}
	for t, bs := range inst.Blocks {
		vals[t] = blocksValue(bs)
	}
	return cty.ObjectVal(vals)
}

func blocksValue(bs []*block) cty.Value {
	var vals []cty.Value
	for _, b := range bs {
		o := map[string]cty.Value{}
		for k, v := range b.Attrs {
			o[k] = v
		}
		for t, nbs := range b.Blocks {
			o[t] = blocksValue(nbs)
		}
		vals = append(vals, cty.ObjectVal(o))
	}
	if len(vals) == 0 {
		return cty.EmptyTupleVal
	}
	return cty.TupleVal(vals)
}

// evalBody evaluates a body's attributes and nested blocks, expanding
// dynamic blocks. Meta-arguments and lifecycle are left out.
func (m *module) evalBody(where string, body *hclsyntax.Body, ctx *hcl.EvalContext) *block {
	out := &block{Attrs: map[string]cty.Value{}, Blocks: map[string][]*block{}, Body: body}
	names := make([]string, 0, len(body.Attributes))
	for n := range body.Attributes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if metaArguments[n] {
			continue
		}
		v, diags := body.Attributes[n].Expr.Value(ctx)
		if m.diag(where+"."+n, diags) {
			v = cty.DynamicVal
		}
		out.Attrs[n] = v
	}
	for _, nb := range body.Blocks {
		switch nb.Type {
		case "lifecycle", "provisioner", "connection":
			continue
		case "dynamic":
			name := nb.Labels[0]
			fe, ok := nb.Body.Attributes["for_each"]
			if !ok {
				m.errorf("%s: dynamic %q has no for_each", where, name)
				continue
			}
			iter := name
			if it, ok := nb.Body.Attributes["iterator"]; ok {
				iter = hcl.ExprAsKeyword(it.Expr)
			}
			v, diags := fe.Expr.Value(ctx)
			if m.diag(where+" dynamic "+name+" for_each", diags) {
				continue
			}
			var content *hclsyntax.Block
			for _, cb := range nb.Body.Blocks {
				if cb.Type == "content" {
					content = cb
				}
			}
			if content == nil {
				m.errorf("%s: dynamic %q has no content", where, name)
				continue
			}
			if !v.IsKnown() || v.IsNull() || !v.CanIterateElements() {
				m.errorf("%s: dynamic %q for_each is not a known collection", where, name)
				continue
			}
			for it := v.ElementIterator(); it.Next(); {
				k, e := it.Element()
				cctx := ctx.NewChild()
				cctx.Variables = map[string]cty.Value{iter: cty.ObjectVal(map[string]cty.Value{"key": k, "value": e})}
				b := m.evalBody(where+"."+name, content.Body, cctx)
				b.Type = name
				out.Blocks[name] = append(out.Blocks[name], b)
			}
		default:
			b := m.evalBody(where+"."+nb.Type, nb.Body, ctx)
			b.Type = nb.Type
			out.Blocks[nb.Type] = append(out.Blocks[nb.Type], b)
		}
	}
	return out
}

// Stand-ins for what providers compute. Only what the module reads is
// here: a reference to anything else is an evaluation error, which is the
// point (it would be one for terraform too, or it needs modelling here).
const fakeProjectNumber = "123456789012"

func (m *module) synthesize(inst *instance) {
	a := inst.Attrs
	project := asString(a["project"])
	if project == "" {
		project = asString(m.vars["project_id"])
	}
	s := cty.StringVal
	set := func(name string, v cty.Value) {
		if _, ok := a[name]; !ok {
			a[name] = v
		}
	}
	set("id", s(inst.addr()))
	switch inst.Res.Type {
	case "google_service_account":
		email := asString(a["account_id"]) + "@" + project + ".iam.gserviceaccount.com"
		set("email", s(email))
		set("member", s("serviceAccount:"+email))
		set("name", s("projects/"+project+"/serviceAccounts/"+email))
		a["id"] = a["name"]
	case "google_pubsub_topic":
		a["id"] = s("projects/" + project + "/topics/" + asString(a["name"]))
	case "google_pubsub_subscription":
		a["id"] = s("projects/" + project + "/subscriptions/" + asString(a["name"]))
	case "google_secret_manager_secret":
		a["id"] = s("projects/" + project + "/secrets/" + asString(a["secret_id"]))
		set("name", s("projects/"+fakeProjectNumber+"/secrets/"+asString(a["secret_id"])))
	case "google_firestore_database":
		a["id"] = s("projects/" + project + "/databases/" + asString(a["name"]))
	case "google_storage_bucket":
		set("url", s("gs://"+asString(a["name"])))
	case "google_cloudfunctions2_function":
		name, region := asString(a["name"]), asString(a["location"])
		set("url", s("https://"+region+"-"+project+".cloudfunctions.net/"+name))
		if sc := inst.one("service_config"); sc != nil {
			sc.Attrs["uri"] = s("https://" + name + "-fakehash-" + region + ".a.run.app")
			sc.Attrs["service"] = s("projects/" + project + "/locations/" + region + "/services/" + name)
		}
	case "google_project":
		set("number", s(fakeProjectNumber))
	case "google_monitoring_dashboard":
		a["id"] = s("projects/" + fakeProjectNumber + "/dashboards/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
	case "archive_file":
		set("output_md5", s("0123456789abcdef0123456789abcdef"))
		set("output_size", cty.NumberIntVal(1))
	}
}

// functions are the terraform functions the module uses, with terraform's
// semantics.
func (m *module) functions() map[string]function.Function {
	str1 := func(f func(string) (cty.Value, error)) function.Function {
		return function.New(&function.Spec{
			Params: []function.Parameter{{Name: "s", Type: cty.String}},
			Type:   function.StaticReturnType(cty.DynamicPseudoType),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				return f(args[0].AsString())
			},
		})
	}
	str2 := func(f func(a, b string) bool) function.Function {
		return function.New(&function.Spec{
			Params: []function.Parameter{{Name: "a", Type: cty.String}, {Name: "b", Type: cty.String}},
			Type:   function.StaticReturnType(cty.Bool),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				return cty.BoolVal(f(args[0].AsString(), args[1].AsString())), nil
			},
		})
	}
	path := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(".", p) // terraform resolves against the working directory, the module here
	}
	bools := func(all bool) function.Function {
		return function.New(&function.Spec{
			Params: []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
			Type:   function.StaticReturnType(cty.Bool),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				for it := args[0].ElementIterator(); it.Next(); {
					_, v := it.Element()
					if v.True() != all {
						return cty.BoolVal(!all), nil
					}
				}
				return cty.BoolVal(all), nil
			},
		})
	}
	return map[string]function.Function{
		"abspath": str1(func(p string) (cty.Value, error) {
			abs, err := filepath.Abs(p)
			return cty.StringVal(filepath.ToSlash(abs)), err
		}),
		"basename": str1(func(p string) (cty.Value, error) { return cty.StringVal(filepath.Base(p)), nil }),
		"dirname":  str1(func(p string) (cty.Value, error) { return cty.StringVal(filepath.Dir(p)), nil }),
		"file": str1(func(p string) (cty.Value, error) {
			b, err := os.ReadFile(path(p))
			return cty.StringVal(string(b)), err
		}),
		"fileexists": str1(func(p string) (cty.Value, error) {
			info, err := os.Stat(path(p))
			return cty.BoolVal(err == nil && !info.IsDir()), nil
		}),
		"sha256": str1(func(s string) (cty.Value, error) {
			sum := sha256.Sum256([]byte(s))
			return cty.StringVal(hex.EncodeToString(sum[:])), nil
		}),
		"yamldecode": str1(func(s string) (cty.Value, error) {
			j, err := yaml.YAMLToJSON([]byte(s))
			if err != nil {
				return cty.NilVal, err
			}
			ty, err := ctyjson.ImpliedType(j)
			if err != nil {
				return cty.NilVal, err
			}
			return ctyjson.Unmarshal(j, ty)
		}),
		"startswith":  str2(strings.HasPrefix),
		"endswith":    str2(strings.HasSuffix),
		"strcontains": str2(strings.Contains),
		"replace": function.New(&function.Spec{
			Params: []function.Parameter{{Name: "str", Type: cty.String}, {Name: "substr", Type: cty.String}, {Name: "replace", Type: cty.String}},
			Type:   function.StaticReturnType(cty.String),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				sub := args[1].AsString()
				if len(sub) > 1 && strings.HasPrefix(sub, "/") && strings.HasSuffix(sub, "/") {
					return stdlib.RegexReplace(args[0], cty.StringVal(sub[1:len(sub)-1]), args[2])
				}
				return stdlib.Replace(args[0], args[1], args[2])
			},
		}),
		"length": function.New(&function.Spec{
			Params: []function.Parameter{{Name: "v", Type: cty.DynamicPseudoType, AllowDynamicType: true}},
			Type:   function.StaticReturnType(cty.Number),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				if args[0].Type() == cty.String {
					return stdlib.Strlen(args[0])
				}
				return args[0].Length(), nil
			},
		}),
		"alltrue":         bools(true),
		"anytrue":         bools(false),
		"can":             tryfunc.CanFunc,
		"try":             tryfunc.TryFunc,
		"coalesce":        stdlib.CoalesceFunc,
		"compact":         stdlib.CompactFunc,
		"concat":          stdlib.ConcatFunc,
		"contains":        stdlib.ContainsFunc,
		"distinct":        stdlib.DistinctFunc,
		"flatten":         stdlib.FlattenFunc,
		"floor":           stdlib.FloorFunc,
		"ceil":            stdlib.CeilFunc,
		"format":          stdlib.FormatFunc,
		"join":            stdlib.JoinFunc,
		"jsonencode":      stdlib.JSONEncodeFunc,
		"keys":            stdlib.KeysFunc,
		"lookup":          stdlib.LookupFunc,
		"lower":           stdlib.LowerFunc,
		"max":             stdlib.MaxFunc,
		"merge":           stdlib.MergeFunc,
		"min":             stdlib.MinFunc,
		"regex":           stdlib.RegexFunc,
		"regexall":        stdlib.RegexAllFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"setsubtract":     stdlib.SetSubtractFunc,
		"setunion":        stdlib.SetUnionFunc,
		"sort":            stdlib.SortFunc,
		"split":           stdlib.SplitFunc,
		"trim":            stdlib.TrimFunc,
		"trimprefix":      stdlib.TrimPrefixFunc,
		"trimspace":       stdlib.TrimSpaceFunc,
		"trimsuffix":      stdlib.TrimSuffixFunc,
		"upper":           stdlib.UpperFunc,
		"values":          stdlib.ValuesFunc,
		"tolist":          stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":           stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber":        stdlib.MakeToFunc(cty.Number),
		"toset":           stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring":        stdlib.MakeToFunc(cty.String),
	}
}

// dependsOn reports whether node references target, directly or not.
func (m *module) dependsOn(node, target string) bool {
	seen := map[string]bool{}
	var walk func(n string) bool
	walk = func(n string) bool {
		if n == target {
			return true
		}
		if seen[n] {
			return false
		}
		seen[n] = true
		for _, d := range m.deps[n] {
			if walk(d) {
				return true
			}
		}
		return false
	}
	return walk(node)
}

// ofType returns the instances of every resource of a type, in a stable order.
func (m *module) ofType(typ string) []*instance {
	var out []*instance
	for _, k := range m.order {
		r := m.resources[k]
		if r.Type != typ || r.Mode != "resource" {
			continue
		}
		keys := make([]string, 0, len(r.Instances))
		for k := range r.Instances {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, r.Instances[k])
		}
	}
	return out
}

func (m *module) instance(addr string, key string) *instance {
	r, ok := m.resources[addr]
	if !ok {
		return nil
	}
	return r.Instances[key]
}

// ctyFromGo converts a Go value (via JSON) to cty, for test inputs.
func ctyFromGo(v any) cty.Value {
	j, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	ty, err := ctyjson.ImpliedType(j)
	if err != nil {
		panic(err)
	}
	out, err := ctyjson.Unmarshal(j, ty)
	if err != nil {
		panic(err)
	}
	return out
}
