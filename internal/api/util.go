package api

import "fmt"

func sprintf(format string, args ...interface{}) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

func errorf(format string, args ...interface{}) error { return fmt.Errorf(format, args...) }
