package api

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func bodyRequest(t *testing.T, contentType string, body []byte) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return r
}

func TestReadManifestFormats(t *testing.T) {
	yamlDoc := "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n  name: a\nspec:\n  replicas: 3\n"
	jsonDoc := `{"apiVersion":"ray.io/v1","kind":"RayCluster","metadata":{"name":"a"},"spec":{"replicas":3}}`
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, err := mw.CreateFormFile("file", "a.yaml")
	require.NoError(t, err)
	_, _ = fw.Write([]byte(yamlDoc))
	require.NoError(t, mw.Close())

	for name, r := range map[string]*http.Request{
		"json":      bodyRequest(t, "application/json", []byte(jsonDoc)),
		"json+utf8": bodyRequest(t, "application/json; charset=utf-8", []byte(jsonDoc)),
		"yaml":      bodyRequest(t, "application/yaml", []byte(yamlDoc)),
		"text/yaml": bodyRequest(t, "text/yaml", []byte("---\n# leading comment\n"+yamlDoc)),
		"multipart": bodyRequest(t, mw.FormDataContentType(), form.Bytes()),
	} {
		t.Run(name, func(t *testing.T) {
			obj, err := readManifest(httptest.NewRecorder(), r)
			require.NoError(t, err)
			assert.Equal(t, "a", obj.GetName())
			assert.Equal(t, "RayCluster", obj.GetKind())
			assert.Equal(t, int64(3), obj.Object["spec"].(map[string]any)["replicas"], "integers stay integers")
		})
	}
}

func TestReadManifestRefusals(t *testing.T) {
	big := append([]byte("apiVersion: v1\nkind: X\ndata: "), bytes.Repeat([]byte("a"), MaxBodyBytes)...)
	var noFile bytes.Buffer
	mw := multipart.NewWriter(&noFile)
	_ = mw.WriteField("other", "x")
	require.NoError(t, mw.Close())

	cases := []struct {
		name, contentType, body string
		code                    int
		msg                     string
	}{
		{"no content type", "", "{}", 415, "not supported"},
		{"xml", "application/xml", "<a/>", 415, "not supported"},
		{"empty", "application/json", "  ", 400, "empty"},
		{"two yaml docs", "application/yaml", "kind: A\n---\nkind: B\n", 400, "2 documents"},
		{"yaml syntax", "application/yaml", "kind: A\nmetadata:\n  name: [x\n", 400, "line"},
		{"yaml duplicate key", "application/yaml", "kind: A\nkind: B\n", 400, "invalid YAML"},
		{"yaml list", "application/yaml", "- a\n- b\n", 400, "mapping"},
		{"json syntax", "application/json", "{\n  \"kind\": \"A\",\n  \"x\": }\n", 400, "line 3"},
		{"json truncated", "application/json", "{\"kind\": ", 400, "unexpected end"},
		{"json array", "application/json", "[1]", 400, "one JSON object"},
		{"json two values", "application/json", "{} {}", 400, "more than one"},
		{"too large", "application/yaml", string(big), 413, "1 MiB"},
		{"multipart without file", mw.FormDataContentType(), noFile.String(), 400, `field "file"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := readManifest(httptest.NewRecorder(), bodyRequest(t, c.contentType, []byte(c.body)))
			require.Error(t, err)
			env, internal := errorEnvelope(err)
			assert.False(t, internal)
			assert.Equal(t, c.code, env.Code)
			assert.Contains(t, env.Msg, c.msg)
		})
	}
}

func TestReadManifestTooLargeWithoutContentLength(t *testing.T) {
	body := strings.NewReader("kind: A\ndata: " + strings.Repeat("b", MaxBodyBytes))
	r := httptest.NewRequest(http.MethodPost, "/", body)
	r.ContentLength = -1
	r.Header.Set("Content-Type", "application/yaml")
	_, err := readManifest(httptest.NewRecorder(), r)
	env, _ := errorEnvelope(err)
	assert.Equal(t, 413, env.Code)
	assert.Equal(t, "RequestEntityTooLarge", env.Reason)
}
