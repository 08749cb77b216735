package expr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
)

// The variables expressions and templates may use. Which are available is
// decided by the [Scope] of the place they are written in.
const (
	Args          = "args"           // map: the tool call's arguments
	CorrelationID = "correlation_id" // string: the bridge's ID for the submission
	Job           = "job"            // map: id, location
	Answers       = "answers"        // map: answers by key, each {action, content}
	BaseURL       = "base_url"       // string: the backend's base URL
	Body          = "body"           // the answer's JSON
	Status        = "status"         // int: the answer's HTTP status
	Headers       = "headers"        // map: the answer's headers, lower-case names
)

// varTypes are the CEL types of the variables.
var varTypes = map[string]*cel.Type{
	Args:          cel.MapType(cel.StringType, cel.DynType),
	CorrelationID: cel.StringType,
	Job:           cel.MapType(cel.StringType, cel.DynType),
	Answers:       cel.MapType(cel.StringType, cel.DynType),
	BaseURL:       cel.StringType,
	Body:          cel.DynType,
	Status:        cel.IntType,
	Headers:       cel.MapType(cel.StringType, cel.StringType),
}

// AllVars lists every variable name, in a stable order.
var AllVars = []string{Args, CorrelationID, Job, Answers, BaseURL, Body, Status, Headers}

// Scope says what an expression or template written in one place may use.
type Scope struct {
	// Vars are the names of the variables available.
	Vars []string
	// Missing says, for a variable that is not available here, why (for
	// example "job": "the job does not exist yet"); it is added to the error
	// of an expression or placeholder that uses it.
	Missing map[string]string
	// Secrets allows ${NAME} and ${file:PATH} references (header values).
	Secrets bool
}

// Has reports whether the scope offers variable name.
func (s Scope) Has(name string) bool { return slices.Contains(s.Vars, name) }

// With returns a copy of s that also offers the given variables.
func (s Scope) With(names ...string) Scope {
	c := s
	c.Vars = slices.Clone(s.Vars)
	for _, n := range names {
		if !slices.Contains(c.Vars, n) {
			c.Vars = append(c.Vars, n)
		}
	}
	return c
}

// MaxCost bounds the work of one evaluation, in CEL's cost units (about one
// per operation and per list element or string byte visited).
const MaxCost = 1_000_000

// Vars are the values of the variables for one evaluation, by name. Use
// decoded JSON values (see [DecodeJSON]), strings and int64s.
type Vars map[string]any

// CallVars are the variables of a tool call: its arguments (a copy, with
// their numbers converted as [Numbers] does, so that 3 renders "3" and
// args.n + 1 works as it reads) and its correlation ID.
func CallVars(args map[string]any, correlationID string) Vars {
	a, _ := Numbers(args).(map[string]any)
	if a == nil {
		a = map[string]any{}
	}
	return Vars{Args: a, CorrelationID: correlationID}
}

// Error is a mistake in an expression or template. Offset, when positive,
// is the 1-based byte position of the mistake in the source text.
type Error struct {
	Offset int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Kind is a type an expression's result may be required to have.
type Kind int

const (
	// AnyKind accepts every result.
	AnyKind Kind = iota
	String
	Number
	Bool
	List
	Map
)

func (k Kind) String() string {
	return [...]string{"any value", "a string", "a number", "a boolean", "a list", "a map"}[k]
}

// Program is a compiled expression.
type Program struct {
	src  string
	prg  cel.Program
	vars []string // variables used
	args []string // argument names used as args.NAME or args["NAME"]
	all  bool     // args used in another way: all of them may be needed
}

var (
	envMu   sync.Mutex
	envs    = map[string]*cel.Env{}
	baseEnv *cel.Env
	baseErr error
)

// env returns the CEL environment declaring vars (cached by their set).
func env(vars []string) (*cel.Env, error) {
	key := slices.Clone(vars)
	slices.Sort(key)
	k := strings.Join(key, ",")
	envMu.Lock()
	defer envMu.Unlock()
	if e, ok := envs[k]; ok {
		return e, nil
	}
	if baseEnv == nil && baseErr == nil {
		baseEnv, baseErr = cel.NewEnv(
			ext.Strings(),
			ext.Lists(),
			ext.Math(),
			ext.Encoders(),
			cel.OptionalTypes(),
			cel.CrossTypeNumericComparisons(true),
			quoteFunctions(),
		)
	}
	if baseErr != nil {
		return nil, baseErr
	}
	var opts []cel.EnvOption
	for _, v := range key {
		t, ok := varTypes[v]
		if !ok {
			return nil, fmt.Errorf("unknown variable %q", v)
		}
		opts = append(opts, cel.Variable(v, t))
	}
	e, err := baseEnv.Extend(opts...)
	if err != nil {
		return nil, err
	}
	envs[k] = e
	return e, nil
}

// Compile parses and type-checks src in scope. When want is not AnyKind,
// an expression whose type is known and is not want is an error.
func Compile(src string, scope Scope, want Kind) (*Program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Msg: "empty expression"}
	}
	e, err := env(scope.Vars)
	if err != nil {
		return nil, err
	}
	checked, iss := e.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, compileError(src, scope, iss.Errors())
	}
	if !kindAccepts(want, checked.OutputType()) {
		return nil, &Error{Msg: fmt.Sprintf("the expression gives %s, but %s is needed here", describeType(checked.OutputType()), want)}
	}
	prg, err := e.Program(checked,
		cel.CostLimit(MaxCost),
		cel.InterruptCheckFrequency(100),
	)
	if err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	p := &Program{src: src, prg: prg}
	p.vars, p.args, p.all = references(checked)
	return p, nil
}

// compileError turns CEL's first issue into an Error at its byte offset,
// with a hint when it names a variable that is not available here.
func compileError(src string, scope Scope, errs []*cel.Error) error {
	first := errs[0]
	msg := first.Message
	if name, ok := strings.CutPrefix(msg, "undeclared reference to '"); ok {
		name, _, _ = strings.Cut(name, "'")
		switch why, ok := scope.Missing[name]; {
		case ok:
			msg = fmt.Sprintf("%s is not available here: %s", name, why)
		case !scope.Has(name):
			msg = fmt.Sprintf("unknown name %s (available here: %s)", name, strings.Join(scope.Vars, ", "))
		}
	}
	off := 0
	if loc := first.Location; loc != nil && loc.Line() > 0 {
		off = byteOffset(src, loc.Line(), loc.Column()) + 1
	}
	return &Error{Offset: off, Msg: msg}
}

// byteOffset converts a 1-based line and 0-based column in code points
// into a byte offset of src.
func byteOffset(src string, line, col int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := strings.IndexByte(src[off:], '\n')
		if i < 0 {
			return off
		}
		off += i + 1
	}
	for c := 0; c < col && off < len(src); c++ {
		_, n := utf8.DecodeRuneInString(src[off:])
		off += n
	}
	return off
}

func kindAccepts(want Kind, t *cel.Type) bool {
	if want == AnyKind || t == nil {
		return true
	}
	switch t.Kind() {
	case types.DynKind, types.AnyKind, types.ErrorKind:
		return true
	case types.OpaqueKind:
		return t.TypeName() == "optional_type"
	}
	switch want {
	case String:
		return t.Kind() == types.StringKind
	case Number:
		return t.Kind() == types.IntKind || t.Kind() == types.UintKind || t.Kind() == types.DoubleKind
	case Bool:
		return t.Kind() == types.BoolKind
	case List:
		return t.Kind() == types.ListKind
	case Map:
		return t.Kind() == types.MapKind
	}
	return true
}

func describeType(t *cel.Type) string {
	switch t.Kind() {
	case types.StringKind:
		return "a string"
	case types.IntKind, types.UintKind, types.DoubleKind:
		return "a number"
	case types.BoolKind:
		return "a boolean"
	case types.ListKind:
		return "a list"
	case types.MapKind:
		return "a map"
	case types.NullTypeKind:
		return "null"
	}
	return t.String()
}

// references lists the variables the checked expression uses and the
// argument names it reads as args.NAME or args["NAME"]; all is true when it
// uses args in another way.
func references(checked *cel.Ast) (vars, args []string, all bool) {
	native := checked.NativeRep()
	seenVar, seenArg := map[string]bool{}, map[string]bool{}
	// A loop variable may shadow a variable's name; then an ident of that
	// name is counted as a use of the variable (for args: of all of them),
	// which may carry more than needed but never less.
	// Idents that are the operand of a args.NAME select or args["NAME"]
	// index are not "other" uses.
	operand := map[int64]bool{}
	visit := func(e ast.Expr) {
		switch e.Kind() {
		case ast.SelectKind:
			s := e.AsSelect()
			if op := s.Operand(); op.Kind() == ast.IdentKind && op.AsIdent() == Args {
				seenArg[s.FieldName()] = true
				operand[op.ID()] = true
			}
		case ast.CallKind:
			c := e.AsCall()
			if (c.FunctionName() == "_[_]" || c.FunctionName() == "_[?_]") && len(c.Args()) == 2 {
				op, idx := c.Args()[0], c.Args()[1]
				if op.Kind() == ast.IdentKind && op.AsIdent() == Args && idx.Kind() == ast.LiteralKind {
					if s, ok := idx.AsLiteral().Value().(string); ok {
						seenArg[s] = true
						operand[op.ID()] = true
					}
				}
			}
		}
	}
	ast.PreOrderVisit(native.Expr(), ast.NewExprVisitor(visit))
	ast.PreOrderVisit(native.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.IdentKind {
			return
		}
		name := e.AsIdent()
		if _, ok := varTypes[name]; !ok {
			return // a comprehension variable
		}
		seenVar[name] = true
		if name == Args && !operand[e.ID()] {
			all = true
		}
	}))
	for v := range seenVar {
		vars = append(vars, v)
	}
	for a := range seenArg {
		args = append(args, a)
	}
	slices.Sort(vars)
	slices.Sort(args)
	return vars, args, all
}

// String returns the expression's source.
func (p *Program) String() string { return p.src }

// Uses reports whether the expression uses variable name.
func (p *Program) Uses(name string) bool { return slices.Contains(p.vars, name) }

// ArgNames returns the argument names the expression reads; all is true
// when it may read any argument (it uses args other than as args.NAME).
func (p *Program) ArgNames() (names []string, all bool) { return p.args, p.all }

// Eval runs the expression and returns its result as a plain Go value:
// nil, bool, int64, uint64, float64, string, []any, map[string]any (time
// stamps and durations as strings, bytes as base64). An optional's value
// is unwrapped; an empty optional gives nil.
func (p *Program) Eval(ctx context.Context, v Vars) (any, error) {
	act := make(map[string]any, len(p.vars))
	for _, name := range p.vars {
		val, ok := v[name]
		if !ok {
			continue // CEL reports the missing attribute if it is read
		}
		act[name] = val
	}
	out, _, err := p.prg.ContextEval(ctx, act)
	if err != nil {
		return nil, evalError(err)
	}
	return native(out)
}

func evalError(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "actual cost limit exceeded"):
		return fmt.Errorf("the expression did too much work (more than %d steps)", MaxCost)
	case strings.Contains(msg, "operation interrupted"):
		return errors.New("the expression was interrupted")
	}
	return errors.New(msg)
}

// native converts a CEL value into a plain Go value.
func native(v ref.Val) (any, error) {
	switch v.Type() {
	case types.NullType:
		return nil, nil
	case types.BoolType, types.IntType, types.UintType, types.DoubleType, types.StringType:
		return v.Value(), nil
	case types.BytesType:
		b, _ := v.Value().([]byte)
		return ext.Base64Encode(b), nil
	case types.TimestampType:
		t, _ := v.Value().(time.Time)
		return t.UTC().Format(time.RFC3339Nano), nil
	case types.DurationType:
		d, _ := v.Value().(time.Duration)
		return d.String(), nil
	case types.OptionalType:
		o := v.(*types.Optional)
		if !o.HasValue() {
			return nil, nil
		}
		return native(o.GetValue())
	}
	switch val := v.(type) {
	case traits.Lister:
		var out []any
		it := val.Iterator()
		for it.HasNext() == types.True {
			e, err := native(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		if out == nil {
			out = []any{}
		}
		return out, nil
	case traits.Mapper:
		out := map[string]any{}
		it := val.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			ks, ok := k.Value().(string)
			if !ok {
				ks = fmt.Sprint(k.Value())
			}
			e, err := native(val.Get(k))
			if err != nil {
				return nil, err
			}
			out[ks] = e
		}
		return out, nil
	}
	if types.IsError(v) {
		return nil, fmt.Errorf("%v", v)
	}
	return nil, fmt.Errorf("the expression gives a value of type %s, which has no JSON form", v.Type().TypeName())
}

// DecodeJSON decodes a JSON document for use as a variable's value:
// objects as map[string]any, arrays as []any, numbers without a fraction
// or exponent as int64 (as a string of their digits when too large for
// it), other numbers as float64.
func DecodeJSON(data []byte) (any, error) {
	d := json.NewDecoder(strings.NewReader(string(data)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("more than one JSON value")
	}
	return Numbers(v), nil
}

// Numbers returns a copy of a decoded JSON value (a tool call's arguments,
// say) with its json.Number values and integral float64s converted as
// [DecodeJSON] converts numbers. v itself is not changed.
func Numbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if !strings.ContainsAny(v.String(), ".eE") {
			if i, err := strconv.ParseInt(v.String(), 10, 64); err == nil {
				return i
			}
			// An integer too large for int64 (a job ID, often) keeps its
			// digits, as a string.
			return v.String()
		}
		f, _ := v.Float64()
		return f
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v)
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = Numbers(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = Numbers(e)
		}
		return out
	}
	return v
}
