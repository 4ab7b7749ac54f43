// Package deploy holds no code: its tests check that the files a team
// deploys hyperplane with (the Dockerfile, the Kubernetes manifests, the
// compose stack and the Grafana dashboard) agree with the code they run.
package deploy

// ConfigPath is where the image reads its configuration: the Dockerfile's
// default command, the Kubernetes ConfigMap's mount and the compose file's
// volume all use it.
const ConfigPath = "/etc/hyperplane/config.yaml"
