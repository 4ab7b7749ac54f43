package provision_test

import (
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/internal/provision"
)

// TestTargetsHaveTheLabels: setup creates the labels' topic or stream
// beside the source's.
func TestTargetsHaveTheLabels(t *testing.T) {
	cfg := config.Default()
	cfg.Source = config.Source{Kind: config.KindKafka, Topics: []string{"impressions"}}
	cfg.Labels = config.Labels{Kind: config.KindKafka, Topics: []string{"clicks"}}
	var names []string
	for _, ts := range provision.Targets(cfg) {
		names = append(names, ts.Kind+":"+ts.Name)
	}
	if got := strings.Join(names, " "); got != "kafka:impressions kafka:clicks" {
		t.Errorf("kafka: setup creates %s", got)
	}
	cfg.Source = config.Source{Kind: config.KindJetStream, Stream: "IMPRESSIONS", Subject: "impressions"}
	cfg.Labels = config.Labels{Kind: config.KindJetStream, Stream: "CLICKS", Subject: "clicks"}
	ts := provision.Targets(cfg)
	if len(ts) != 2 || ts[1].Kind != "stream" || ts[1].Name != "CLICKS" || ts[1].Subject != "clicks" {
		t.Errorf("jetstream: setup creates %+v", ts)
	}
	if ts[1].Partitions != 0 {
		t.Errorf("jetstream: the labels' stream of an unpartitioned source has %d partitions", ts[1].Partitions)
	}
	cfg.Source.StreamPartitions, cfg.Labels.Subject = 4, "clicks.*"
	if ts := provision.Targets(cfg); len(ts) != 2 || ts[1].Partitions != 4 || ts[1].Subject != "clicks.*" {
		t.Errorf("jetstream: the labels' stream of a source of 4 partitions: %+v, want 4 partitions of clicks.*", ts)
	}
}

// TestTargetsOnce: a topic or subject several keys name is one target,
// with every key, after the source.
func TestTargetsOnce(t *testing.T) {
	cfg := config.Default()
	cfg.Source = config.Source{Kind: config.KindJetStream, Stream: "EX", Subject: "ex.*", StreamPartitions: 4}
	cfg.Outputs.Predictions = config.Destination{Kind: config.KindJetStream, Topic: "out"}
	cfg.Outputs.Misclassifications = config.Destination{Kind: config.KindJetStream, Topic: "out"}
	cfg.Outputs.DeadLetter = config.Destination{Kind: config.KindNATS, Topic: "dead"}
	ts := provision.Targets(cfg)
	var got []string
	for _, t := range ts {
		got = append(got, t.Kind+":"+t.Name+"="+strings.Join(t.Keys, ","))
	}
	want := "stream:EX=source.stream jetstream:out=outputs.predictions,outputs.misclassifications nats:dead=outputs.dead_letter"
	if strings.Join(got, " ") != want {
		t.Errorf("targets %s, want %s", strings.Join(got, " "), want)
	}
	if ts[0].Partitions != 4 || ts[0].Subject != "ex.*" {
		t.Errorf("the source stream: %+v, want 4 partitions of ex.*", ts[0])
	}
}
