package config

import (
	"fmt"
	"io"
	"reflect"
	"strings"
)

// redactedText stands for a secret's value wherever the configuration is
// shown.
const redactedText = "[redacted]"

// Usage writes every key, grouped by section, one line each: the flag, its
// type, its environment variable, its help and its default. A secret's
// default is never shown.
func Usage(w io.Writer) {
	def := reflect.ValueOf(Default())
	type row struct{ group, flag, typ, env, text string }
	rows := []row{{
		flag: "--config",
		typ:  "file",
		env:  configEnv,
		text: "YAML file of keys, read before the environment and the flags",
	}}
	for _, k := range keys() {
		text := k.help
		switch v := def.FieldByIndex(k.index); {
		case k.secret:
			text += " (secret)"
		case !v.IsZero():
			text += fmt.Sprintf(" (default %s)", quoteDefault(v))
		}
		group := k.path[:strings.LastIndexByte(k.path, '.')]
		rows = append(rows, row{group, "--" + k.path, typeName(k.typ), k.env, strings.TrimSpace(text)})
	}
	var wf, wt, we int
	for _, r := range rows {
		wf, wt, we = max(wf, len(r.flag)), max(wt, len(r.typ)), max(we, len(r.env))
	}
	group := ""
	for _, r := range rows {
		if r.group != group {
			group = r.group
			fmt.Fprintf(w, "\n%s:\n", group)
		}
		fmt.Fprintf(w, "  %-*s  %-*s  %-*s  %s\n", wf, r.flag, wt, r.typ, we, r.env, r.text)
	}
}

func quoteDefault(v reflect.Value) string {
	if v.Kind() == reflect.String {
		return fmt.Sprintf("%q", v.String())
	}
	return formatText(v)
}

// Redacted is c with every secret that is set replaced by "[redacted]":
// the form of the configuration to log or print.
func (c Config) Redacted() Config {
	root := reflect.ValueOf(&c).Elem()
	for _, k := range keys() {
		switch v := root.FieldByIndex(k.index); {
		case k.secret && v.String() != "":
			v.SetString(redactedText)
		case v.Kind() == reflect.Slice && !v.IsNil():
			// A copy, so that the result shares nothing with c.
			v.Set(reflect.AppendSlice(reflect.MakeSlice(v.Type(), 0, v.Len()), v))
		}
	}
	return c
}

// String is the effective configuration on one line, "key=value" pairs in
// declaration order, secrets redacted: safe to log, and what fmt and zap
// show for a Config.
func (c Config) String() string {
	root := reflect.ValueOf(c.Redacted())
	var b strings.Builder
	for i, k := range keys() {
		if i > 0 {
			b.WriteByte(' ')
		}
		text := formatText(root.FieldByIndex(k.index))
		if text == "" || strings.ContainsAny(text, " \t\n\"=") {
			text = fmt.Sprintf("%q", text)
		}
		b.WriteString(k.path + "=" + text)
	}
	return b.String()
}

// String shows the SASL settings with the password redacted, so that
// printing a Kafka section does not leak it.
func (s SASL) String() string {
	pw := ""
	if s.Password != "" {
		pw = redactedText
	}
	return fmt.Sprintf("{mechanism:%s username:%s password:%s}", s.Mechanism, s.Username, pw)
}
