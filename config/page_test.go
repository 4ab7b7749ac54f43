package config

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite ../docs/configuration.md")

// pagePath is the configuration page, written from the keys by
// TestConfigurationPage.
const pagePath = "../docs/configuration.md"

// pageIntro opens the configuration page, above the tables of keys.
const pageIntro = `# Configuration

Every key of the worker, with its flag, its environment variable, its type, its default and
what it does. This page is generated from the configuration's own declaration (the ` + "`help`" + `
tags and ` + "`Default()`" + ` in package config); ` + "`go test ./config -run TestConfigurationPage -update`" + `
writes it again, and the test fails while it is stale. Do not edit it by hand.

## One surface

Every key is a YAML field, an ` + "`HYPERPLANE_*`" + ` environment variable and a flag:
` + "`source.topics`" + ` is ` + "`source: {topics: [...]}`" + ` in the file, ` + "`HYPERPLANE_SOURCE_TOPICS`" + ` and
` + "`--source.topics`" + `. The precedence is flag > environment > file > default.

- The file is the one ` + "`--config FILE`" + ` names or, without that flag, the one
  ` + "`HYPERPLANE_CONFIG`" + ` names (handy in a container's environment).
- A variable set to the empty string counts as not set: it leaves the key at the file's
  value or the default. To empty a key (` + "`http.addr`" + `, say), give the flag
  (` + "`--http.addr ''`" + `) or the file's field.
- A boolean flag alone is true, and also takes ` + "`true`" + ` or ` + "`false`" + ` (` + "`--serve.nats false`" + `). A
  list is comma-separated in a flag or a variable (` + "`--kafka.brokers b1:9092,b2:9092`" + `).
  A duration is written as ` + "`30s`" + `, ` + "`5m`" + `, ` + "`1h`" + `.
- A mistyped flag, or a key of the file that is unknown or in the wrong section
  (` + "`model: {hash_bits: 20}`" + `), is refused with the key probably meant; a ` + "`HYPERPLANE_*`" + ` variable that is
  no key (` + "`HYPERPLANE_SNAPSHOT_UR`" + `) is ignored with a warning naming the variable
  probably meant.
- A bad value stops start-up with the key named and what to do, exit status 2.

` + "`hyperplane config --defaults`" + ` prints every key at its default as a commented config file,
a starting point for your own; ` + "`hyperplane config --config FILE`" + ` prints the configuration
` + "`run`" + ` would use with that file, the environment and the flags, validated. ` + "`hyperplane run -h`" + `
lists the same keys in the terminal.

Secrets are never printed, by ` + "`config`" + `, ` + "`run -h`" + `, the logs or the errors: a password is
shown as ` + "`[redacted]`" + `, except by ` + "`config`" + `, which writes one that is set as
` + "`password: \"\" # set, not shown`" + ` (its output stays a config file, the password to come from the
environment or a file), and ` + "`run -h`" + `, which shows none; the credentials in a URL are
shown as ` + "`[redacted]`" + ` (` + "`nats://alice:[redacted]@host`" + `), and so is every query parameter
of a store URL other than the drivers' documented settings such as
` + "`region`" + ` or ` + "`endpoint`" + `. Pass credentials in the environment or a mounted file, never in a
flag: [operations.md](operations.md#credentials) says where each kind goes. A key holding
` + "`[redacted]`" + ` (copied from that output or a log) is refused, naming the key.

Snapshot URLs (` + "`snapshot.url`" + `): ` + "`file:///dir`" + `,
` + "`s3://bucket/prefix?endpoint=...&region=...&use_path_style=true`" + ` (S3 or MinIO; credentials
from the standard AWS environment and files), ` + "`gs://`" + `, ` + "`azblob://`" + `, ` + "`mem://`" + `.
Destinations (` + "`outputs.*`" + `): ` + "`kafka:<topic>`" + `, ` + "`jetstream:<subject>`" + ` or ` + "`nats:<subject>`" + `.
An output the worker would read back is refused, naming its key: a topic of ` + "`source.topics`" + ` or
` + "`labels.topics`" + `, or a subject that ` + "`source.subject`" + ` or ` + "`labels.subject`" + ` takes in (wildcards
included, JetStream and core NATS alike), whose events would be learned or joined and give more.
So are JetStream subjects of ` + "`outputs.predictions`" + `, ` + "`misclassifications`" + `, ` + "`dead_letter`" + `, ` + "`drift`" + ` and
` + "`promotions`" + ` that one stream stores: their events carry the id of the example they are about,
which is their ` + "`Nats-Msg-Id`" + `, so the stream would keep one of each example's and drop the others.
Two of them on one Kafka topic or one subject are refused too: a consumer that drops repeats by
` + "`event_id`" + ` would keep one of each example's events.
`

// writePage writes the configuration page: pageIntro, then a table of
// keys for each section, in declaration order.
func writePage(w *bytes.Buffer) {
	w.WriteString(pageIntro)
	def := reflect.ValueOf(Default())
	section := ""
	for _, k := range keys() {
		if s := k.path[:strings.LastIndexByte(k.path, '.')]; s != section {
			section = s
			fmt.Fprintf(w, "\n## %s\n\n", section)
			w.WriteString("| flag | environment variable | type | default | meaning |\n")
			w.WriteString("| --- | --- | --- | --- | --- |\n")
		}
		text := k.help
		if k.secret == secretInURLs {
			text += " " + urlSecretNote
		}
		typ := typeName(k.typ)
		if isDuration(k.typ) {
			typ = "duration"
		}
		fmt.Fprintf(w, "| `--%s` | `%s` | %s | %s | %s |\n", k.path, k.env, typ,
			pageDefault(k, def.FieldByIndex(k.index)), pageText(text))
	}
}

// pageDefault is a key's default as the page shows it.
func pageDefault(k key, v reflect.Value) string {
	switch {
	case k.secret == secretValue:
		return "(secret)"
	case v.IsZero() && (isTextual(v.Type()) || v.Kind() == reflect.Slice):
		return "(empty)"
	}
	return "`" + strings.ReplaceAll(formatText(v), "|", `\|`) + "`"
}

// pageText is help text as a table cell shows it: a pipe would end the
// cell, and <topic> would be read as HTML.
var pageText = strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace

// TestConfigurationPage: docs/configuration.md is what the keys say
// today. "go test ./config -run TestConfigurationPage -update" rewrites
// it.
func TestConfigurationPage(t *testing.T) {
	var got bytes.Buffer
	writePage(&got)
	if *update {
		if err := os.WriteFile(pagePath, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(pagePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("%s is stale: go test ./config -run TestConfigurationPage -update writes it again", pagePath)
	}
	for _, k := range keys() {
		if !bytes.Contains(want, []byte("| `--"+k.path+"` | `"+k.env+"` |")) {
			t.Errorf("%s: no row for %s", pagePath, k.path)
		}
	}
}
