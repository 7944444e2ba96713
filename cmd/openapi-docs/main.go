// Command openapi-docs writes the API's published documents (make swagger): from the Swagger 2.0
// document swag generated, docs/swagger/swagger.{json,yaml} and docs/openapi/openapi.json under the
// directory given, after checking them as OpenAPI tools would.
//
//	openapi-docs <swag's swagger.json> <docs directory>
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"ray-service/internal/openapi"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: openapi-docs <swag's swagger.json> <docs directory>")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "openapi-docs:", err)
		os.Exit(1)
	}
}

func run(in, dir string) error {
	swag, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	docs, err := openapi.Build(swag)
	if err != nil {
		return err
	}
	if err := openapi.Validate(docs); err != nil {
		return err
	}
	for path, data := range map[string][]byte{"swagger/swagger.json": docs.Swagger2JSON, "swagger/swagger.yaml": docs.Swagger2YAML,
		"openapi/openapi.json": docs.OpenAPI3JSON} {
		path = filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
