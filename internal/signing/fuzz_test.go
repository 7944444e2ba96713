package signing

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/ray"
	"ray-service/internal/ray/raytest"
)

// The fuzz target feeds what the service reads from the cluster, and may not trust, to the code that
// reads it: no input may panic. `go test` runs its seeds; `make test` fuzzes it for a bounded time.

// FuzzTemplateRead: a ConfigMap labelled as a template, signed or not, is read or refused, never a
// panic; what is read names the object its ConfigMap says.
func FuzzTemplateRead(f *testing.F) {
	for _, s := range raytest.ManifestSeeds(f) {
		f.Add(string(s), "ray-template-demo", "alice", true)
		f.Add(string(s), "demo", "", false)
	}
	signer, err := New([]byte("a key of the fuzz targets, 32 bytes at least"))
	if err != nil {
		f.Fatal(err)
	}
	kinds := ray.NewKinds()
	f.Fuzz(func(t *testing.T, manifest, cmName, creator string, signed bool) {
		for _, k := range kinds.All() {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cmName, Namespace: "team",
				Labels:      map[string]string{ray.TemplateLabel: "true", ray.TemplateKindLabel: k.Kind},
				Annotations: map[string]string{ray.CreatorKey: creator}}, Data: map[string]string{ray.TemplateDataKey: manifest}}
			if signed {
				signer.Sign(cm)
			}
			tpl, err := signer.Read(k, cm)
			if err != nil {
				continue
			}
			if tpl.Manifest.GetName() != k.TemplateObjectName(cm) || tpl.Manifest.GetNamespace() != "team" {
				t.Fatalf("%s: template %s read as %s/%s", k.Kind, cmName, tpl.Manifest.GetNamespace(), tpl.Manifest.GetName())
			}
			k.TemplateSummary(tpl)
			tpl.DetailObject()
		}
	})
}
