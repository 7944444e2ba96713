package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// MaxBodyBytes is the largest request body accepted.
const MaxBodyBytes = 1 << 20

// FileField is the multipart form field that carries an uploaded manifest.
const FileField = "file"

var errTooLarge = statusError(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
	"the request body is larger than 1 MiB")

// readManifest reads the one resource a request body holds: JSON, YAML, or a file uploaded as multipart
// form field "file" (JSON or YAML).
func readManifest(w http.ResponseWriter, r *http.Request) (*unstructured.Unstructured, error) {
	if r.ContentLength > MaxBodyBytes {
		return nil, errTooLarge
	}
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		mediaType = ""
	}
	body := http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	var data []byte
	format := ""
	switch mediaType {
	case "application/json":
		format = "json"
		data, err = io.ReadAll(body)
	case "application/yaml", "text/yaml", "application/x-yaml":
		format = "yaml"
		data, err = io.ReadAll(body)
	case "multipart/form-data":
		data, err = readFormFile(body, params["boundary"])
	default:
		return nil, statusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			fmt.Sprintf("content type %q is not supported: send application/json, application/yaml, text/yaml or multipart/form-data with the manifest in field %q", r.Header.Get("Content-Type"), FileField))
	}
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, errTooLarge
		}
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			return nil, err
		}
		return nil, badRequest("reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, badRequest("the request body is empty: send one RayCluster, RayJob or RayService manifest")
	}
	if format == "" { // an uploaded file: JSON when it looks like it, else YAML
		format = "yaml"
		if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
			format = "json"
		}
	}
	var obj map[string]any
	if format == "json" {
		obj, err = decodeJSON(data)
	} else {
		obj, err = decodeYAML(data)
	}
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// readFormFile returns the content of form field "file" of a multipart body.
func readFormFile(body io.Reader, boundary string) ([]byte, error) {
	if boundary == "" {
		return nil, badRequest("multipart/form-data without a boundary")
	}
	mr := multipart.NewReader(body, boundary)
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil, badRequest("the multipart body has no field %q holding the manifest", FileField)
		}
		if err != nil {
			return nil, err
		}
		if part.FormName() == FileField {
			return io.ReadAll(part)
		}
	}
}

func decodeJSON(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var first json.RawMessage
	if err := dec.Decode(&first); err != nil {
		return nil, jsonSyntaxError(data, err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, badRequest("the body holds more than one JSON value: send one resource per request")
	}
	if !bytes.HasPrefix(bytes.TrimSpace(first), []byte("{")) {
		return nil, badRequest("the body must be one JSON object (a Kubernetes manifest)")
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(first, &obj); err != nil {
		return nil, jsonSyntaxError(data, err)
	}
	return obj, nil
}

func jsonSyntaxError(data []byte, err error) error {
	if syn, ok := errors.AsType[*json.SyntaxError](err); ok {
		line, col := position(data, syn.Offset)
		return badRequest("invalid JSON at line %d, column %d: %v", line, col, syn)
	}
	if typ, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		line, col := position(data, typ.Offset)
		return badRequest("invalid JSON at line %d, column %d: %v", line, col, typ)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		line, col := position(data, int64(len(data)))
		return badRequest("invalid JSON: unexpected end at line %d, column %d", line, col)
	}
	return badRequest("invalid JSON: %v", err)
}

// position turns a byte offset into a 1-based line and column.
func position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}

func decodeYAML(data []byte) (map[string]any, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, badRequest("invalid YAML: %v", err)
		}
		if !emptyYAML(doc) {
			docs = append(docs, doc)
		}
	}
	switch {
	case len(docs) == 0:
		return nil, badRequest("the YAML body holds no document: send one resource")
	case len(docs) > 1:
		return nil, badRequest("the YAML body holds %d documents: send one resource per request", len(docs))
	}
	js, err := yaml.YAMLToJSONStrict(docs[0])
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
		return nil, badRequest("invalid YAML: %s", strings.TrimPrefix(msg, "yaml: "))
	}
	if !bytes.HasPrefix(bytes.TrimSpace(js), []byte("{")) {
		return nil, badRequest("the YAML document must be a mapping (a Kubernetes manifest)")
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(js, &obj); err != nil {
		return nil, badRequest("invalid YAML: %v", err)
	}
	return obj, nil
}

// emptyYAML tells whether a YAML document holds only blank lines and comments.
func emptyYAML(doc []byte) bool {
	for line := range strings.SplitSeq(string(doc), "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			return false
		}
	}
	return true
}

// manifestRequest reads what create and replace share: dryRun and the manifest of the body.
func manifestRequest(c *gin.Context) (*unstructured.Unstructured, bool, error) {
	dryRun, err := boolParam(c, "dryRun")
	if err != nil {
		return nil, false, err
	}
	obj, err := readManifest(c.Writer, c.Request)
	return obj, dryRun, err
}

// readJSON decodes a JSON body (what names it in messages) into v, refusing unknown fields.
func readJSON(c *gin.Context, what string, v any) error {
	if c.ContentType() != "application/json" {
		return statusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType, "send the "+what+" as application/json")
	}
	body := http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes)
	data, err := io.ReadAll(body)
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return errTooLarge
	}
	if err != nil {
		return badRequest("reading the request body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("invalid %s: %v", what, err)
	}
	if dec.More() {
		return badRequest("invalid %s: one JSON object, nothing after it", what)
	}
	return nil
}
