package deploy

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The autoscaling examples (examples/autoscaling) scale the voice-agent
// StatefulSet on the demand metric edge exports (allocator/collector.go);
// the HPA is decoded strictly with the other manifests (manifests_test.go).
func TestAutoscalingExamplesUseTheDemandMetric(t *testing.T) {
	for _, path := range []string{"examples/autoscaling/hpa.yaml", "examples/autoscaling/keda-scaledobject.yaml"} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var obj struct {
			Kind string `json:"kind"`
			Spec struct {
				ScaleTargetRef struct {
					Kind string `json:"kind"`
					Name string `json:"name"`
				} `json:"scaleTargetRef"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if obj.Spec.ScaleTargetRef.Kind != "StatefulSet" || obj.Spec.ScaleTargetRef.Name != "voice-agent" {
			t.Errorf("%s scales %+v, want the voice-agent StatefulSet", path, obj.Spec.ScaleTargetRef)
		}
		if !strings.Contains(string(data), "edge_tier_demand_pods") {
			t.Errorf("%s does not use edge_tier_demand_pods", path)
		}
	}
}
