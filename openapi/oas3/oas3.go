package oas3

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"
)

// ProblemSchema is the components/schemas name of the problem body.
const ProblemSchema = "api.Problem"

// ProblemContentType is the media type of every error body.
const ProblemContentType = "application/problem+json"

// Convert returns the OpenAPI 3.0 document for a Swagger 2.0 one, as JSON
// and as YAML, after validating it.
func Convert(swagger2 []byte) (jsonDoc, yamlDoc []byte, err error) {
	var doc2 openapi2.T
	if err := json.Unmarshal(swagger2, &doc2); err != nil {
		return nil, nil, fmt.Errorf("read swagger 2.0: %w", err)
	}
	doc, err := openapi2conv.ToV3(&doc2)
	if err != nil {
		return nil, nil, fmt.Errorf("convert to openapi 3: %w", err)
	}
	if doc.Components == nil || doc.Components.Schemas[ProblemSchema] == nil {
		return nil, nil, fmt.Errorf("no %s schema: does an annotation still name Problem?", ProblemSchema)
	}
	problem := openapi3.NewContentWithSchemaRef(openapi3.NewSchemaRef("#/components/schemas/"+ProblemSchema, doc.Components.Schemas[ProblemSchema].Value), []string{ProblemContentType})
	errorResponse := func(desc string) *openapi3.ResponseRef {
		return &openapi3.ResponseRef{Value: openapi3.NewResponse().WithDescription(desc).WithContent(problem)}
	}
	paths := doc.Paths.Map()
	keys := make([]string, 0, len(paths))
	for k := range paths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, path := range keys {
		for _, op := range paths[path].Operations() {
			for code, rr := range op.Responses.Map() {
				if rr.Value == nil {
					continue
				}
				if n, err := strconv.Atoi(code); err == nil && n >= 400 {
					rr.Value.Content = problem
					continue
				}
				// Swagger 2.0 has one schema for all of an operation's
				// media types; a Server-Sent Events stream is text, not
				// the JSON page the schema describes.
				if mt := rr.Value.Content.Get("text/event-stream"); mt != nil {
					sse := openapi3.NewStringSchema()
					sse.Description = "Server-Sent Events: each event's id is the event ID, its data one jobs.Event as JSON"
					mt.Schema = openapi3.NewSchemaRef("", sse)
				}
			}
			if op.Security != nil && len(*op.Security) > 0 {
				for code, desc := range map[string]string{"401": "no or an unknown bearer token", "429": "the tenant's rate limit; Retry-After says when to retry"} {
					if op.Responses.Value(code) == nil {
						op.Responses.Set(code, errorResponse(desc))
					}
				}
			}
			if op.Responses.Default() == nil {
				op.Responses.Set("default", errorResponse("any other error (for example 500, or 503 when Redis is down), as an RFC 9457 problem"))
			}
		}
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, nil, fmt.Errorf("the converted document is invalid: %w", err)
	}
	var jb bytes.Buffer
	enc := json.NewEncoder(&jb)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, nil, fmt.Errorf("encode openapi 3 json: %w", err)
	}
	// JSON is YAML: read it as a node tree (keeping the key order) and
	// write that as YAML.
	var node yaml.Node
	if err := yaml.Unmarshal(jb.Bytes(), &node); err != nil {
		return nil, nil, fmt.Errorf("openapi 3 yaml: %w", err)
	}
	clearStyle(&node)
	var yb bytes.Buffer
	ye := yaml.NewEncoder(&yb)
	ye.SetIndent(2)
	if err := ye.Encode(&node); err != nil {
		return nil, nil, fmt.Errorf("encode openapi 3 yaml: %w", err)
	}
	return jb.Bytes(), yb.Bytes(), nil
}

// clearStyle drops the flow (JSON) style the nodes were read with, so that
// the YAML comes out in block style.
func clearStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		clearStyle(c)
	}
}
