package ray

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var unknownFieldRE = regexp.MustCompile(`unknown field "([^"]+)"`)

// StrictError turns the apiserver's BadRequest for unknown fields into Invalid naming each field, so that
// the caller gets 422 with one detail per field, like any other schema violation.
func (k *Kind) StrictError(err error, name string) error {
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
