package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/hyperplane-ml/hyperplane/learner"
	"gopkg.in/yaml.v3"
)

// Challenger is one entry of model.challengers: a learner configuration
// learned beside the model on the same examples, named, and told by the
// model.learner keys it changes.
type Challenger struct {
	Name string
	// Changes are the model.learner keys the challenger sets, in the
	// order given, each value parsed into its key's type.
	Changes []Change
}

// Change is one model.learner key a challenger sets: Key is its name
// under model.learner (hash_seed), Value of that key's Go type.
type Change struct {
	Key   string
	Value any
}

// Challengers are model.challengers. In the file they are a list of
// mappings, each a name and model.learner keys:
//
//	challengers:
//	  - name: perceptron
//	    algorithm: perceptron
//	  - name: other-seed
//	    hash_seed: 7
//
// In a variable or a flag, the same as text: challengers separated by
// ';', each its name, ':' and its keys as key=value separated by ','
// ("perceptron:algorithm=perceptron;other-seed:hash_seed=7").
type Challengers []Challenger

// learnerKey is the field of learner.Config a challenger's key sets, and
// an error that says why a key cannot be set.
func learnerKey(name string) (int, error) {
	t := reflect.TypeFor[learner.Config]()
	if name == "classes" {
		return 0, errors.New("a challenger learns the model's classes: the label of an example is decoded once for all")
	}
	i, ok := fieldByYAMLName(t, name)
	if !ok || name == "name" {
		var names []string
		for _, n := range yamlNames(t) {
			if n != "classes" {
				names = append(names, n)
			}
		}
		return 0, fmt.Errorf("unknown key (a challenger has name and the keys of model.learner it changes: %s)", strings.Join(names, ", "))
	}
	return i, nil
}

// parseChange parses one key=value of a challenger.
func parseChange(key, text string) (Change, error) {
	i, err := learnerKey(key)
	if err != nil {
		return Change{}, err
	}
	v, err := parseText(reflect.TypeFor[learner.Config]().Field(i).Type, text)
	if err != nil {
		return Change{}, err
	}
	return Change{Key: key, Value: v.Interface()}, nil
}

// Learner is base, the model's learner configuration, with the
// challenger's changes.
func (c Challenger) Learner(base learner.Config) learner.Config {
	cfg := base
	cfg.Classes = slices.Clone(base.Classes)
	v := reflect.ValueOf(&cfg).Elem()
	for _, ch := range c.Changes {
		if i, err := learnerKey(ch.Key); err == nil {
			v.Field(i).Set(reflect.ValueOf(ch.Value))
		}
	}
	return cfg
}

// MarshalText writes the text form (see Challengers).
func (cs Challengers) MarshalText() ([]byte, error) {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(c.Name)
		b.WriteByte(':')
		for j, ch := range c.Changes {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%s", ch.Key, formatText(reflect.ValueOf(ch.Value)))
		}
	}
	return []byte(b.String()), nil
}

// UnmarshalText reads the text form (see Challengers); an empty text is
// no challenger.
func (cs *Challengers) UnmarshalText(text []byte) error {
	var out Challengers
	for i, part := range strings.Split(string(text), ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, keys, ok := strings.Cut(part, ":")
		if !ok {
			return fmt.Errorf("challenger %d: %q: want name:key=value,key=value", i, part)
		}
		c := Challenger{Name: strings.TrimSpace(name)}
		for _, kv := range strings.Split(keys, ",") {
			if kv = strings.TrimSpace(kv); kv == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("challenger %d (%s): %q: want key=value", i, c.Name, kv)
			}
			ch, err := parseChange(strings.TrimSpace(k), strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("challenger %d (%s): %s: %w", i, c.Name, strings.TrimSpace(k), err)
			}
			// As in the file: of a key given twice, which value is meant
			// is not said.
			if slices.ContainsFunc(c.Changes, func(p Change) bool { return p.Key == ch.Key }) {
				return fmt.Errorf("challenger %d (%s): %s: given twice", i, c.Name, ch.Key)
			}
			c.Changes = append(c.Changes, ch)
		}
		out = append(out, c)
	}
	*cs = out
	return nil
}

// decodeChallengers sets model.challengers from node n: a list of
// mappings, or the text form.
func (d yamlDecoder) decodeChallengers(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind == yaml.ScalarNode {
		var cs Challengers
		if err := cs.UnmarshalText([]byte(n.Value)); err != nil {
			return d.errorf(n, "%s: %v", path, err)
		}
		v.Set(reflect.ValueOf(cs))
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return d.errorf(n, "%s: want a list of challengers, each a mapping of name and model.learner keys, not %s", path, nodeKind(n))
	}
	var cs Challengers
	for i, item := range n.Content {
		item = resolve(item)
		at := fmt.Sprintf("%s[%d]", path, i)
		if item.Kind != yaml.MappingNode {
			return d.errorf(item, "%s: want a mapping of name and model.learner keys, not %s", at, nodeKind(item))
		}
		var c Challenger
		seen := map[string]int{}
		for j := 0; j+1 < len(item.Content); j += 2 {
			kn, vn := resolve(item.Content[j]), resolve(item.Content[j+1])
			if first, dup := seen[kn.Value]; dup {
				return d.errorf(kn, "key %s.%s is given twice (first at line %d)", at, kn.Value, first)
			}
			seen[kn.Value] = kn.Line
			// A key a challenger cannot set is refused for what it is,
			// whatever its value's form.
			if kn.Value != "name" {
				if _, err := learnerKey(kn.Value); err != nil {
					return d.errorf(kn, "%s.%s: %v", at, kn.Value, err)
				}
			}
			if vn.Kind != yaml.ScalarNode || isNull(vn) {
				return d.errorf(vn, "%s.%s: want a single value, not %s", at, kn.Value, nodeKind(vn))
			}
			if kn.Value == "name" {
				c.Name = vn.Value
				continue
			}
			ch, err := parseChange(kn.Value, vn.Value)
			if err != nil {
				return d.errorf(kn, "%s.%s: %v", at, kn.Value, err)
			}
			c.Changes = append(c.Changes, ch)
		}
		cs = append(cs, c)
	}
	v.Set(reflect.ValueOf(cs))
	return nil
}

// challengersYAML is model.challengers as WriteYAML writes it: a list of
// mappings.
func challengersYAML(cs Challengers) *yaml.Node {
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	if len(cs) == 0 {
		seq.Style = yaml.FlowStyle
	}
	for _, c := range cs {
		m := &yaml.Node{Kind: yaml.MappingNode}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "name"}, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: c.Name})
		for _, ch := range c.Changes {
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: ch.Key}, yamlValue(reflect.ValueOf(ch.Value)))
		}
		seq.Content = append(seq.Content, m)
	}
	return seq
}

// ChallengerConfigs are model.challengers as the learner takes them: each
// name with model.learner changed as it says.
func (c Config) ChallengerConfigs() []learner.ChallengerConfig {
	var out []learner.ChallengerConfig
	for _, ch := range c.Model.Challengers {
		out = append(out, learner.ChallengerConfig{Name: ch.Name, Config: ch.Learner(c.Model.Learner)})
	}
	return out
}

// validateChallengers checks model.challengers and model.compare: every
// challenger named, by a name of its own, and a valid learner once its
// changes are made.
func (c Config) validateChallengers() error {
	if a := c.Model.Compare.Alpha; !(a > 0 && a < 1) {
		return fieldErr("model.compare.alpha", "must be in (0, 1), such as 0.05, got %v", a)
	}
	if err := c.Model.Compare.Promote.Validate(); err != nil {
		return fieldErr("model.compare.promote", "%v", err)
	}
	if c.Model.Compare.Promote == PromoteAuto && len(c.Model.Challengers) == 0 {
		return fieldErr("model.compare.promote", "auto, but model.challengers names no challenger to promote")
	}
	if c.Outputs.Promotions.Kind != "" && len(c.Model.Challengers) == 0 {
		return fieldErr("outputs.promotions", "set, but model.challengers names no challenger that could be promoted")
	}
	if c.Outputs.ChallengerPredictions.Kind != "" && len(c.Model.Challengers) == 0 {
		return fieldErr("outputs.challenger_predictions", "set, but model.challengers names no challenger whose predictions it would get")
	}
	for i, ch := range c.Model.Challengers {
		at := fmt.Sprintf("model.challengers[%d]", i)
		switch {
		case ch.Name == "":
			return fieldErr(at+".name", "required: the challenger's name")
		case len(ch.Name) > maxNameLen:
			return fieldErr(at+".name", "longer than %d bytes", maxNameLen)
		case ch.Name == c.Model.Name:
			return fieldErr(at+".name", "%q is model.name: a challenger needs a name of its own", ch.Name)
		}
		for _, r := range ch.Name {
			if !isNameRune(r) {
				return fieldErr(at+".name", "%q may hold only letters, digits, '.', '_' and '-'", ch.Name)
			}
		}
		for j, other := range c.Model.Challengers[:i] {
			if other.Name == ch.Name {
				return fieldErr(at+".name", "%q also names model.challengers[%d]", ch.Name, j)
			}
		}
		for _, change := range ch.Changes {
			if _, err := learnerKey(change.Key); err != nil {
				return fieldErr(at+"."+change.Key, "%v", err)
			}
		}
		if err := ch.Learner(c.Model.Learner).ValidateNew(); err != nil {
			var fe *learner.FieldError
			if errors.As(err, &fe) {
				return &FieldError{Field: at + "." + fe.Field, Problem: fe.Problem}
			}
			return &FieldError{Field: at, Problem: err.Error()}
		}
	}
	return nil
}

// ValidateModel checks the model's keys alone (model.*: its name, learner,
// drift, challengers and compare), as Validate would, for commands that
// read examples from a file and so need no source, broker or store.
func (c Config) ValidateModel() error {
	if err := c.validateModel(); err != nil {
		return err
	}
	return c.validateChallengers()
}
