package config

import (
	"fmt"
	"io"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// WriteYAML writes c as a config file: every key, in declaration order,
// under a comment with its help, its environment variable and its flag.
// Load reads it back to c unless c holds credentials, which are never
// written: a secret that is set is left empty, and a URL-valued key
// (secret:"url") is written with its credentials hidden as Redacted does,
// each with a comment saying so. Written with Default, it is the
// configuration reference.
func WriteYAML(w io.Writer, c Config) error {
	root := &yaml.Node{Kind: yaml.MappingNode}
	v, shown := reflect.ValueOf(c), reflect.ValueOf(c.Redacted())
	for _, k := range keys() {
		parts := strings.Split(k.path, ".")
		m := section(root, parts[:len(parts)-1])
		name := &yaml.Node{Kind: yaml.ScalarNode, Value: parts[len(parts)-1],
			HeadComment: fmt.Sprintf("%s\n%s, --%s", k.help, k.env, k.path)}
		val := yamlValue(shown.FieldByIndex(k.index))
		switch {
		case k.secret == secretValue && val.Value != "":
			val.Value, val.LineComment = "", "set, not shown"
		case k.secret == secretInURLs && !reflect.DeepEqual(v.FieldByIndex(k.index).Interface(), shown.FieldByIndex(k.index).Interface()):
			val.LineComment = "credentials not shown"
		}
		m.Content = append(m.Content, name, val)
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return enc.Close()
}

// section is the mapping at path below m, added at the end of m if it is
// not there yet: keys come in declaration order, so a section's keys are
// consecutive.
func section(m *yaml.Node, path []string) *yaml.Node {
	for _, name := range path {
		n := len(m.Content)
		if n == 0 || m.Content[n-2].Value != name {
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, &yaml.Node{Kind: yaml.MappingNode})
			n += 2
		}
		m = m.Content[n-1]
	}
	return m
}

// yamlValue is a key's value as a YAML node that decodes to the same
// value: strings are tagged so that "1" or "true" stay strings.
func yamlValue(v reflect.Value) *yaml.Node {
	switch {
	case v.Type() == reflect.TypeFor[Challengers]():
		return challengersYAML(v.Interface().(Challengers))
	case isTextual(v.Type()):
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: formatText(v)}
	case v.Kind() == reflect.Slice:
		seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for i := range v.Len() {
			seq.Content = append(seq.Content, yamlValue(v.Index(i)))
		}
		return seq
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Value: formatText(v)}
}
