package k8s

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// The object operations below act as the caller: dyn must be the caller's client, so that Kubernetes
// RBAC and admission decide.

// Get reads one object from the apiserver.
func (k *Kind) Get(ctx context.Context, dyn dynamic.Interface, ns, name string) (*unstructured.Unstructured, error) {
	return dyn.Resource(k.GVR()).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// Create creates a prepared manifest. Unknown fields are refused (strict field validation).
func (k *Kind) Create(ctx context.Context, dyn dynamic.Interface, o *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := dyn.Resource(k.GVR()).Namespace(o.GetNamespace()).Create(ctx, o, opts)
	return out, k.strictError(err, o.GetName())
}

// Update replaces an object with a prepared manifest.
func (k *Kind) Update(ctx context.Context, dyn dynamic.Interface, o *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	opts := metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := dyn.Resource(k.GVR()).Namespace(o.GetNamespace()).Update(ctx, o, opts)
	return out, k.strictError(err, o.GetName())
}

// Delete deletes an object; its Ray cluster and pods go with it through garbage collection.
func (k *Kind) Delete(ctx context.Context, dyn dynamic.Interface, ns, name string) error {
	policy := metav1.DeletePropagationBackground
	return dyn.Resource(k.GVR()).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy})
}

var unknownFieldRE = regexp.MustCompile(`unknown field "([^"]+)"`)

// strictError turns the apiserver's BadRequest for unknown fields into Invalid naming each field, so that
// the caller gets 422 with one detail per field, like any other schema violation.
func (k *Kind) strictError(err error, name string) error {
	if err == nil || !apierrors.IsBadRequest(err) {
		return err
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err
	}
	matches := unknownFieldRE.FindAllStringSubmatch(status.Status().Message, -1)
	if len(matches) == 0 {
		return err
	}
	fields := make([]string, 0, len(matches))
	causes := make([]metav1.StatusCause, 0, len(matches))
	for _, m := range matches {
		fields = append(fields, m[1])
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueNotSupported, Field: m[1],
			Message: "unknown field: the " + k.Kind + " schema has no such field"})
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid,
		Message: fmt.Sprintf("%s %q is invalid: unknown field(s) %s", k.Kind, name, strings.Join(fields, ", ")),
		Details: &metav1.StatusDetails{Name: name, Group: RayGroupVersion.Group, Kind: k.Kind, Causes: causes},
	}}
}
