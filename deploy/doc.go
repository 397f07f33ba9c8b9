// Package deploy holds edge's Kubernetes manifests (kustomize, plain YAML);
// its test decodes every manifest into the Kubernetes API types.
package deploy
