package deploy

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/config"
	"gopkg.in/yaml.v3"
)

// composeFile is the part of deploy/compose/compose.yaml the tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Profiles    []string          `yaml:"profiles"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("compose", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return c
}

// TestComposeStack: the local stack has its parts, and every worker in it
// runs a config file that loads and validates with the service's
// environment and points at the stack's own brokers, topics and bucket.
func TestComposeStack(t *testing.T) {
	c := readCompose(t)
	for _, name := range []string{"kafka", "kafka-init", "nats", "minio", "minio-init", "hyperplane", "producer"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("compose.yaml has no service %s", name)
		}
	}
	if roles := c.Services["kafka"].Environment["KAFKA_PROCESS_ROLES"]; roles != "broker,controller" {
		t.Errorf("Kafka runs as %q, want KRaft: broker,controller", roles)
	}
	if !slices.Contains(c.Services["nats"].Command, "-js") {
		t.Errorf("NATS runs without JetStream: %v", c.Services["nats"].Command)
	}
	topics := map[string]bool{}
	for _, m := range regexp.MustCompile(`\b([a-z-]+):\d+\b`).FindAllStringSubmatch(strings.Join(c.Services["kafka-init"].Command, " "), -1) {
		topics[m[1]] = true
	}
	streams := map[string]bool{}
	for _, m := range regexp.MustCompile(`\b[A-Z_]+:([a-z-]+)\b`).FindAllStringSubmatch(strings.Join(c.Services["nats-init"].Command, " "), -1) {
		streams[m[1]] = true
	}
	bucket := regexp.MustCompile(`mc mb \S+ local/([a-z0-9-]+)`).FindStringSubmatch(strings.Join(c.Services["minio-init"].Command, " "))
	if bucket == nil {
		t.Fatal("minio-init creates no bucket")
	}
	kafkaListeners := c.Services["kafka"].Environment["KAFKA_ADVERTISED_LISTENERS"]

	workers := 0
	for name, s := range c.Services {
		if len(s.Command) > 0 || s.Image != "hyperplane:local" {
			continue
		}
		workers++
		t.Run(name, func(t *testing.T) {
			cfg := workerConfig(t, s)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			_, port, _ := net.SplitHostPort(cfg.HTTP.Addr)
			if !slices.ContainsFunc(s.Ports, func(p string) bool { return strings.HasSuffix(p, ":"+port) }) {
				t.Errorf("ports %v do not publish http.addr's port %s", s.Ports, port)
			}
			switch cfg.Source.Kind {
			case "kafka":
				for _, b := range cfg.Kafka.Brokers {
					if !strings.Contains(kafkaListeners, "://"+b) {
						t.Errorf("kafka.brokers has %s, which Kafka does not advertise (%s)", b, kafkaListeners)
					}
				}
				for _, topic := range cfg.Source.Topics {
					if !topics[topic] {
						t.Errorf("source topic %s is not created by kafka-init", topic)
					}
				}
			case "jetstream":
				if !strings.Contains(cfg.NATS.URL, "nats:4222") {
					t.Errorf("nats.url %s is not the stack's NATS", cfg.NATS.URL)
				}
			default:
				t.Errorf("source.kind %s", cfg.Source.Kind)
			}
			for _, d := range cfg.Outputs.Destinations() {
				dest := d.Dest
				if dest.IsZero() && (d.Key == "outputs.challenger_predictions" || d.Key == "outputs.promotions") && len(cfg.Model.Challengers) == 0 {
					continue
				}
				if dest.IsZero() {
					t.Fatalf("%s: no destination", d.Key)
				}
				if (dest.Kind == config.KindKafka && !topics[dest.Topic]) || (dest.Kind == config.KindJetStream && !streams[dest.Topic]) {
					t.Errorf("output %s is not created by the stack", dest)
				}
			}
			u, err := url.Parse(cfg.Snapshot.URL)
			if err != nil {
				t.Fatal(err)
			}
			if u.Host != bucket[1] || !strings.HasPrefix(u.Query().Get("endpoint"), "http://minio:") {
				t.Errorf("snapshot.url %s is not the bucket %s of the stack's MinIO", cfg.Snapshot.URL, bucket[1])
			}
			if s.Environment["AWS_ACCESS_KEY_ID"] != c.Services["minio"].Environment["MINIO_ROOT_USER"] {
				t.Error("the worker's S3 credentials are not MinIO's")
			}
		})
	}
	if workers < 2 {
		t.Errorf("%d workers in the stack, want the Kafka one and the JetStream one", workers)
	}

	// Each producer publishes to a source some worker reads.
	for _, name := range []string{"producer", "producer-nats"} {
		cmd := c.Services[name].Command
		i := slices.Index(cmd, "-to")
		if len(cmd) == 0 || cmd[0] != "gen" || i < 0 {
			t.Fatalf("%s runs %v, want hyperplane gen -to ...", name, cmd)
		}
		var dest config.Destination
		if err := dest.UnmarshalText([]byte(cmd[i+1])); err != nil {
			t.Fatal(err)
		}
		if (dest.Kind == config.KindKafka && !topics[dest.Topic]) || (dest.Kind == config.KindJetStream && !streams[dest.Topic]) {
			t.Errorf("%s publishes to %s, which the stack does not create", name, cmd[i+1])
		}
	}
}

// workerConfig loads the config file that the worker service s mounts at
// ConfigPath, with s's environment.
func workerConfig(t *testing.T, s composeService) config.Config {
	t.Helper()
	var file string
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == ConfigPath {
			file = filepath.Join("compose", parts[0])
		}
	}
	if file == "" {
		t.Fatalf("no volume at %s in %v", ConfigPath, s.Volumes)
	}
	cfg, err := config.Load([]string{"--config", file}, func(k string) string { return s.Environment[k] })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
