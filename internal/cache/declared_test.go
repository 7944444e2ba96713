package cache

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/ray"
)

// The fields are read from the CRDs' schemas as the apiserver publishes them in its OpenAPI v3 document
// of ray.io/v1 (components.schemas, named io.ray.v1.<Kind>): KubeRay v1.7.0's RayService has
// spec.suspend and its RayCronJob spec.timeZone; v1.6's have neither, and a status field of the same
// name is not the spec's.
func TestDeclaredIn(t *testing.T) {
	v17 := `{"openapi":"3.0.0","components":{"schemas":{
		"io.ray.v1.RayService":{"type":"object","properties":{"spec":{"type":"object","properties":{
			"suspend":{"type":"boolean"},"serveConfigV2":{"type":"string"}}}}},
		"io.ray.v1.RayCronJob":{"type":"object","properties":{"spec":{"type":"object","properties":{
			"schedule":{"type":"string"},"suspend":{"type":"boolean"},"timeZone":{"type":"string"}}}}}}}}`
	got, err := declaredIn([]byte(v17))
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{ray.FieldServiceSuspend: true, ray.FieldCronTimeZone: true}, got)

	v16 := `{"openapi":"3.0.0","components":{"schemas":{
		"io.ray.v1.RayService":{"type":"object","properties":{"spec":{"type":"object","properties":{
			"serveConfigV2":{"type":"string"}}},"status":{"type":"object","properties":{"suspend":{"type":"boolean"}}}}},
		"io.ray.v1.RayCronJob":{"type":"object","properties":{"spec":{"type":"object","properties":{
			"schedule":{"type":"string"},"suspend":{"type":"boolean"}}}}}}}}`
	got, err = declaredIn([]byte(v16))
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{ray.FieldServiceSuspend: false, ray.FieldCronTimeZone: false}, got)

	_, err = declaredIn([]byte(`<html>`))
	assert.ErrorContains(t, err, "reading the OpenAPI document of ray.io/v1")
}
