package config

import (
	"fmt"
	"io"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// WriteYAML writes c as a config file that Load reads back to c: every
// key, in declaration order, under a comment with its help, its
// environment variable and its flag. Secrets are never written: one that
// is set is left empty, with a comment saying so. Written with Default, it
// is the configuration reference.
func WriteYAML(w io.Writer, c Config) error {
	doc := yamlMapping(reflect.ValueOf(c), nil)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return enc.Close()
}

// yamlMapping is struct v as a YAML mapping, each key commented.
func yamlMapping(v reflect.Value, prefix []string) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := yamlName(f)
		if !ok {
			continue
		}
		path := append(append([]string(nil), prefix...), name)
		k := &yaml.Node{Kind: yaml.ScalarNode, Value: name}
		if f.Type.Kind() == reflect.Struct {
			m.Content = append(m.Content, k, yamlMapping(v.Field(i), path))
			continue
		}
		dotted := strings.Join(path, ".")
		k.HeadComment = fmt.Sprintf("%s\n%s%s, --%s", f.Tag.Get("help"), envPrefix, strings.ToUpper(strings.Join(path, "_")), dotted)
		val := yamlValue(v.Field(i))
		if f.Tag.Get("secret") == "true" && val.Value != "" {
			val.Value, val.LineComment = "", "set, not shown"
		}
		m.Content = append(m.Content, k, val)
	}
	return m
}

// yamlValue is a key's value as a YAML node that decodes to the same
// value: strings are tagged so that "1" or "true" stay strings.
func yamlValue(v reflect.Value) *yaml.Node {
	switch v.Kind() {
	case reflect.String:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v.String()}
	case reflect.Slice:
		seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for i := range v.Len() {
			seq.Content = append(seq.Content, yamlValue(v.Index(i)))
		}
		return seq
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Value: formatText(v)}
}
