package config

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// leakText is the secret the tests below try to leak.
const leakText = "L3AKED-s3cret"

// secretSamples are values of key k that carry leakText, in every shape
// that a URL-valued key might be given one: user info with and without a
// password, in a list, in the query, in a nested URL, in a fragment, split
// badly by a '/', '?', '#' or ',' in the password, in a URL that does not
// parse, with and without a scheme.
func secretSamples(k key) []string {
	if k.secret == secretValue {
		return []string{leakText, "x " + leakText}
	}
	var out []string
	for _, scheme := range []string{"nats://", "s3://", "mem://", "file://", ""} {
		out = append(out,
			scheme+"alice:"+leakText+"@host:4222",
			scheme+leakText+"@host:4222/p",
			scheme+"host:1,"+scheme+"bob:"+leakText+"@host:2",
			scheme+"host:4222/p?region=eu&token="+leakText,
			scheme+"host:4222/p?"+leakText,
			scheme+"host:4222?endpoint=http://alice:"+leakText+"@minio:9000",
			scheme+"host:4222#"+leakText,
			scheme+"alice:pa/"+leakText+"@host",
			scheme+"alice:pa?"+leakText+"@host",
			scheme+"alice:pa#"+leakText+"@host",
			scheme+"alice:pa,"+leakText+"@host",
			scheme+"alice:"+leakText+"@host:port",
		)
	}
	return out
}

// secretKeys are the keys whose values carry credentials, from the keys
// table: a key added with a secret tag is tested without further code.
func secretKeys(t *testing.T) []key {
	var ks []key
	kinds := map[secrecy]int{}
	for _, k := range keys() {
		if k.secret != public {
			ks = append(ks, k)
			kinds[k.secret]++
		}
	}
	if kinds[secretValue] == 0 || kinds[secretInURLs] == 0 {
		t.Fatalf("secret keys by kind %v: the test proves nothing", kinds)
	}
	return ks
}

// TestSecretsNeverShown sets every secret-bearing key to values carrying
// a secret and looks for it in every way the configuration is shown: its
// String and fmt forms, those of each section around the key, Redacted,
// WriteYAML, the key's flag value, and the errors of Validate and Load
// (from a flag, a variable and the file, and a stray argument after the
// key's flag).
func TestSecretsNeverShown(t *testing.T) {
	for _, k := range secretKeys(t) {
		for i, sample := range secretSamples(k) {
			// Not named by the sample: t.TempDir's name would hold it.
			t.Run(fmt.Sprintf("%s/%d", k.path, i), func(t *testing.T) {
				v, err := parseText(k.typ, sample)
				if err != nil {
					t.Fatal(err)
				}
				c := validJetStream()
				reflect.ValueOf(&c).Elem().FieldByIndex(k.index).Set(v)
				var yamlOut bytes.Buffer
				if err := WriteYAML(&yamlOut, c); err != nil {
					t.Fatal(err)
				}
				shown := map[string]string{
					"String":    c.String(),
					"%v":        fmt.Sprintf("%v", c),
					"%+v":       fmt.Sprintf("%+v", c),
					"Redacted":  fmt.Sprintf("%#v", reflect.ValueOf(c.Redacted()).FieldByIndex(k.index).Interface()),
					"WriteYAML": yamlOut.String(),
					"flag":      (&flagValue{k: &k, v: &v}).String(),
					"Validate":  fmt.Sprint(c.Validate()),
				}
				// Each section around the key, printed alone.
				root := reflect.ValueOf(c)
				for depth := 1; depth < len(k.index); depth++ {
					section := root.FieldByIndex(k.index[:depth]).Interface()
					shown[fmt.Sprintf("section %d %%v", depth)] = fmt.Sprintf("%v", section)
					shown[fmt.Sprintf("section %d %%+v", depth)] = fmt.Sprintf("%+v", section)
				}
				yamlValue := strconv.Quote(sample)
				if k.typ.Kind() == reflect.Slice {
					yamlValue = "[" + yamlValue + "]"
				}
				for name, l := range map[string]struct {
					args []string
					env  map[string]string
				}{
					"flag":          {[]string{"--" + k.path, sample}, nil},
					"variable":      {nil, map[string]string{k.env: sample}},
					"file":          {[]string{"--config", writeConfig(t, yamlAt(k.path, yamlValue))}, nil},
					"file scalar":   {[]string{"--config", writeConfig(t, yamlAt(k.path, strconv.Quote(sample)))}, nil},
					"stray":         {[]string{"--" + k.path + "=", sample}, nil},
					"stray, spaced": {[]string{"--" + k.path, "x", sample}, nil},
				} {
					_, err := Load(l.args, envOf(l.env))
					shown["Load "+name] = fmt.Sprint(err)
				}
				for how, s := range shown {
					if strings.Contains(s, leakText) {
						t.Errorf("%s=%s: %s shows the secret: %s", k.path, sample, how, s)
					}
				}
			})
		}
	}
}

// TestRefusedSecretsNeverShown: a list of URLs that does not parse (an
// empty element) is refused, from a flag or a variable, with its
// credentials hidden, though the flag package quotes what it refuses.
func TestRefusedSecretsNeverShown(t *testing.T) {
	lists := 0
	for _, k := range secretKeys(t) {
		if k.secret != secretInURLs || k.typ.Kind() != reflect.Slice {
			continue
		}
		lists++
		for _, bad := range []string{",alice:" + leakText + "@k1:9092", "alice:" + leakText + "@k1:9092,,k2:9092"} {
			for name, l := range map[string]struct {
				args []string
				env  map[string]string
			}{
				"flag":          {[]string{"--" + k.path, bad}, nil},
				"flag, joined":  {[]string{"--" + k.path + "=" + bad}, nil},
				"flag, twice":   {[]string{"--" + k.path, "k0:9092", "--" + k.path, bad}, nil},
				"variable":      {nil, map[string]string{k.env: bad}},
				"file and flag": {[]string{"--config", writeConfig(t, yamlAt(k.path, "[k0:9092]")), "--" + k.path, bad}, nil},
			} {
				_, err := Load(l.args, envOf(l.env))
				if err == nil || !strings.Contains(err.Error(), "empty element") {
					t.Errorf("%s %s %q: got %v, want an empty element refused", name, k.path, bad, err)
				}
				if err != nil && strings.Contains(err.Error(), leakText) {
					t.Errorf("%s %s: the error shows the secret: %v", name, k.path, err)
				}
			}
		}
	}
	if lists == 0 {
		t.Fatal("no key holds a list of URLs: the test proves nothing")
	}
}

// yamlAt is a config file setting the key at the dotted path to the YAML
// value.
func yamlAt(path, value string) string {
	segs := strings.Split(path, ".")
	var y strings.Builder
	for i, s := range segs[:len(segs)-1] {
		y.WriteString(strings.Repeat("  ", i) + s + ":\n")
	}
	y.WriteString(strings.Repeat("  ", len(segs)-1) + segs[len(segs)-1] + ": " + value + "\n")
	return y.String()
}

// TestURLKeysAreSecret: a key that takes URLs or addresses, by its help,
// is tagged secret:"url", so that credentials in it are never shown.
func TestURLKeysAreSecret(t *testing.T) {
	for _, k := range keys() {
		help := strings.ToLower(k.help)
		if (strings.Contains(help, "url") || strings.Contains(help, "://") || strings.Contains(help, "host:port")) &&
			!strings.HasPrefix(k.path, "http.") && k.secret == public {
			t.Errorf("%s takes URLs or addresses (%q) but is not tagged secret:\"url\"", k.path, k.help)
		}
	}
}

// TestWriteYAMLHidesURLCredentials: a URL is written without its
// credentials, with a comment saying so, and the rest of it as it is.
func TestWriteYAMLHidesURLCredentials(t *testing.T) {
	c := validJetStream()
	c.NATS.URL = "nats://alice:hunter2@n1:4222,nats://n2:4222"
	c.Snapshot.URL = "s3://models/prod?region=eu-west-1&token=hunter2"
	var buf bytes.Buffer
	if err := WriteYAML(&buf, c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"url: nats://alice:[redacted]@n1:4222,nats://n2:4222 # credentials not shown",
		"url: s3://models/prod?region=eu-west-1&[redacted] # credentials not shown",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("no %q in\n%s", want, buf.String())
		}
	}
	c.NATS.URL = "nats://n1:4222"
	buf.Reset()
	if err := WriteYAML(&buf, c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "url: nats://n1:4222\n") {
		t.Errorf("a URL without credentials is not written as it is:\n%s", buf.String())
	}
}
