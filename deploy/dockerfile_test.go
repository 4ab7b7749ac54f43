package deploy

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/config"
)

// dockerfile is what the tests read from the Dockerfile.
type dockerfile struct {
	args       map[string]string // ARG defaults
	from       []string          // FROM images, in order
	build      []string          // the words of the go build command
	copies     []string          // COPY lines of the runtime stage
	user       string
	expose     []string
	entrypoint string
	cmd        string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	d := dockerfile{args: map[string]string{}}
	// Join continuation lines, drop comments.
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	for _, line := range lines {
		instr, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(instr) {
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			d.args[k] = v
		case "FROM":
			d.from = append(d.from, rest)
		case "RUN":
			if strings.Contains(rest, "go build") {
				d.build = buildWords(rest)
			}
		case "COPY":
			if len(d.from) > 1 {
				d.copies = append(d.copies, rest)
			}
		case "USER":
			d.user = rest
		case "EXPOSE":
			d.expose = append(d.expose, strings.Fields(rest)...)
		case "ENTRYPOINT":
			d.entrypoint = rest
		case "CMD":
			d.cmd = rest
		}
	}
	return d
}

// buildWords are the words of the go build command in a shell line, from
// the environment assignments before it to its package: quotes removed,
// --mount options and the like before it dropped.
func buildWords(line string) []string {
	var words []string
	var cur strings.Builder
	quote := byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0 && (c == ' ' || c == '\t'):
			if cur.Len() > 0 {
				words = append(words, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteByte(c)
		}
	}
	if cur.Len() > 0 {
		words = append(words, cur.String())
	}
	i := slices.Index(words, "go")
	start := i
	for start > 0 && strings.Contains(words[start-1], "=") && !strings.HasPrefix(words[start-1], "-") {
		start--
	}
	return words[start:]
}

// ciBuild is the go build command of .ci/run's release build.
func ciBuild(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, "go build") && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			return buildWords(strings.TrimSpace(line))
		}
	}
	t.Fatal(".ci/run has no go build command")
	return nil
}

// flags are the settings of a go build command that decide the binary:
// its environment, its flags (the output path aside) and its package.
func flags(words []string) (env, opts []string, pkg string) {
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "go" || w == "build":
		case strings.HasPrefix(w, "-o"):
			if w == "-o" {
				i++
			}
		case strings.HasPrefix(w, "-"):
			opts = append(opts, w)
		case strings.Contains(w, "="):
			env = append(env, w)
		default:
			pkg = w
		}
	}
	return env, opts, pkg
}

// TestDockerfileAndCIBuildAgree: the image's binary and the one .ci/run
// builds and tests come from the same command: static, trimmed, the
// version stamped, the same package.
func TestDockerfileAndCIBuildAgree(t *testing.T) {
	d := readDockerfile(t)
	denv, dopts, dpkg := flags(d.build)
	cenv, copts, cpkg := flags(ciBuild(t))
	if !slices.Equal(denv, cenv) || !slices.Equal(dopts, copts) || dpkg != cpkg {
		t.Fatalf("the Dockerfile builds with %v %v %s, .ci/run with %v %v %s", denv, dopts, dpkg, cenv, copts, cpkg)
	}
	if !slices.Contains(denv, "CGO_ENABLED=0") {
		t.Errorf("the build is not static: environment %v", denv)
	}
	if !slices.Contains(dopts, "-trimpath") {
		t.Errorf("the build does not trim paths: %v", dopts)
	}
	if !slices.ContainsFunc(dopts, func(o string) bool { return strings.Contains(o, "-X main.version=") }) {
		t.Errorf("the build does not stamp main.version: %v", dopts)
	}
	if dpkg != "./cmd/hyperplane" {
		t.Errorf("the build's package is %s, want ./cmd/hyperplane", dpkg)
	}
}

// TestDockerfileGoVersion: the build stage's Go is the release of go.mod.
// (.ci/run checks that its release build used the same release.)
func TestDockerfileGoVersion(t *testing.T) {
	d := readDockerfile(t)
	v := d.args["GO_VERSION"]
	if v == "" || !strings.Contains(d.from[0], "golang:${GO_VERSION}") {
		t.Fatalf("the build stage is %q with GO_VERSION %q: want golang:${GO_VERSION}", d.from[0], v)
	}
	mod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(mod))
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	if release(v) != goLine[1] {
		t.Errorf("the Dockerfile builds with Go %s, go.mod says go %s", v, goLine[1])
	}
}

// release is the major.minor of a Go version.
func release(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// TestDockerfileRuntime: a distroless non-root image whose entrypoint is
// the binary the build stage made, run with the config path that the
// Kubernetes manifests mount, exposing the port of http.addr.
func TestDockerfileRuntime(t *testing.T) {
	d := readDockerfile(t)
	if len(d.from) != 2 {
		t.Fatalf("%d stages, want a build and a runtime stage", len(d.from))
	}
	if rt := d.from[1]; !strings.HasPrefix(rt, "gcr.io/distroless/static") || !strings.HasSuffix(rt, ":nonroot") {
		t.Errorf("runtime image %s, want distroless static :nonroot", rt)
	}
	if !strings.HasPrefix(d.user, "nonroot") && !strings.HasPrefix(d.user, "65532") {
		t.Errorf("USER %q, want nonroot", d.user)
	}
	out := d.build[slices.Index(d.build, "-o")+1]
	if len(d.copies) != 1 || !strings.Contains(d.copies[0], "--from=build "+out+" ") {
		t.Fatalf("the runtime stage copies %v, want the build's %s", d.copies, out)
	}
	bin := strings.Fields(d.copies[0])[2]
	if d.entrypoint != `["`+bin+`"]` {
		t.Errorf("ENTRYPOINT %s, want [%q]", d.entrypoint, bin)
	}
	if want := `["run", "--config", "` + ConfigPath + `"]`; d.cmd != want {
		t.Errorf("CMD %s, want %s", d.cmd, want)
	}
	_, port, err := net.SplitHostPort(config.Default().HTTP.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.expose, []string{port}) {
		t.Errorf("EXPOSE %v, want the port of http.addr's default, %s", d.expose, port)
	}
}
