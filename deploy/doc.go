// Package deploy holds what installs and runs jobbridge outside a developer's
// checkout: the container image (Containerfile, built offline from a binary
// built beforehand, and Containerfile.multistage, the same image built from
// source), the Kubernetes manifests (kubernetes/), the systemd unit
// (systemd/) and, at the repository root, the MCP Registry entry
// (server.json).
//
// It has no code of its own. Its tests check these files against the server
// they deploy: every flag they pass is a flag of `jobbridge serve`, every
// port is one it listens on, every probe path answers 200 from a real
// server, every Secret and ConfigMap they name is there, and the image files
// agree with one another and with server.json. deploy/image-test.sh
// (`make image-test`) builds the image and runs its binary.
package deploy
