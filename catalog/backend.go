package catalog

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Block is a config block the catalog decodes, then gives its defaults,
// then validates: a backend's config or a tool's job block. Validate reports
// every problem, joined, each as an internal/fielderr Error naming its field
// (and, with an Offset, the byte of the field's value at fault), so that the
// catalog can point at it; other errors are reported at the block.
type Block interface {
	SetDefaults()
	Validate() error
}

// JobBlock is a tool's job block.
type JobBlock interface {
	Block
	// ArgNames lists the {args.NAME} placeholders the block uses; each NAME
	// must be a property of the tool's input schema.
	ArgNames() []string
}

// AddressChecker is an optional interface of a backend config: CheckAddress
// reports addresses the backend's adapter would refuse to connect to (the
// REST adapter's literal or localhost base_url on a refused network), so
// that the mistake is reported when the catalog loads. It is called after
// Validate, and its problems are reported like Validate's.
type AddressChecker interface {
	CheckAddress() error
}

// Warner is an optional interface of a job block: Warnings reports, joined
// and in the form of Validate's problems, what is allowed but probably a
// mistake. The catalog still loads; the problems are in [Catalog.Warnings].
type Warner interface {
	Warnings() error
}

// BackendType is a kind of backend a catalog may declare (`type: NAME`) and
// how to decode its blocks. The catalog knows no backend types of its own:
// the program hands them to [Load] or [Parse], so that adding one touches
// only its adapter and the program's table of types.
type BackendType struct {
	// Name is the value of `type:` that selects this type.
	Name string
	// NewConfig returns a new, empty backend config: a non-nil pointer to a
	// struct whose `yaml` tags name the backend's keys (all but `type`).
	// The decoded value is [Backend.Config].
	NewConfig func() Block
	// NewJob returns a new, empty job block of a tool on such a backend,
	// likewise. The decoded value is [Tool.Job].
	NewJob func() JobBlock
	// EnvValues, when set, returns the values of a decoded backend config
	// (a value NewConfig returned) that the adapter expands from the
	// environment as ${NAME} (header values, tokens), for [Backend.EnvRefs].
	EnvValues func(config Block) []string
}

// typeSet is the backend types a load was given.
type typeSet struct {
	byName map[string]BackendType
	// names in the order given, for messages.
	names []string
}

// checkTypes reports backend types the program got wrong: they are not
// problems of the catalog file.
func checkTypes(types []BackendType) (typeSet, error) {
	set := typeSet{byName: make(map[string]BackendType, len(types))}
	var errs []error
	for i, t := range types {
		switch _, dup := set.byName[t.Name]; {
		case t.Name == "":
			errs = append(errs, fmt.Errorf("catalog: backend type %d has no name", i))
			continue
		case dup:
			errs = append(errs, fmt.Errorf("catalog: backend type %q is given twice", t.Name))
			continue
		case t.NewConfig == nil || !isStructPointer(t.NewConfig()):
			errs = append(errs, fmt.Errorf("catalog: backend type %q: NewConfig must return a non-nil pointer to a struct", t.Name))
		case t.NewJob == nil || !isStructPointer(t.NewJob()):
			errs = append(errs, fmt.Errorf("catalog: backend type %q: NewJob must return a non-nil pointer to a struct", t.Name))
		}
		set.byName[t.Name] = t
		set.names = append(set.names, t.Name)
	}
	return set, errors.Join(errs...)
}

func isStructPointer(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && !r.IsNil() && r.Elem().Kind() == reflect.Struct
}

// known lists the type names for messages: "known: a, b".
func (s typeSet) known() string {
	if len(s.names) == 0 {
		return "this program knows no backend types"
	}
	return "known: " + strings.Join(s.names, ", ")
}
