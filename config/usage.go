package config

import (
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Usage writes every key, grouped by section, one line each: the flag, its
// type, its environment variable, its help and its default. A secret's
// default is never shown; a key whose URLs' credentials are hidden says
// so.
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
		case k.secret == secretValue:
			text += " (secret)"
		case !v.IsZero():
			text += fmt.Sprintf(" (default %s)", quoteDefault(v))
		}
		if k.secret == secretInURLs {
			text += " " + urlSecretNote
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
	if isTextual(v.Type()) {
		return fmt.Sprintf("%q", formatText(v))
	}
	return formatText(v)
}
