package main

// The core/v1 OpenAPI v3 document, made from the structured-merge-diff schema of the built-in types
// that client-go ships (build.sh copies it to schema.yaml), so that it describes today's fields
// (restartPolicy on containers, resizePolicy...). The same conversion as kubeadmit's openapi.go
// (../shared/tools/kubeadmit), where the mutating policy dispatcher reads it; here the Pod's
// schema becomes the type of `object` for the cost estimate.

import (
	_ "embed"
	"encoding/json"
	"sync"

	"k8s.io/client-go/openapi"
	"sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

//go:embed schema.yaml
var builtinSchemaYAML string

type coreV1OpenAPI struct{}

func (coreV1OpenAPI) Paths() (map[string]openapi.GroupVersion, error) {
	return map[string]openapi.GroupVersion{"api/v1": coreV1Document{}}, nil
}

type coreV1Document struct{}

func (coreV1Document) ServerRelativeURL() string { return "/openapi/v3/api/v1?hash=celcost" }

func (coreV1Document) Schema(string) ([]byte, error) {
	documentOnce.Do(func() { document, documentErr = buildDocument() })
	return document, documentErr
}

var (
	documentOnce sync.Once
	document     []byte
	documentErr  error
)

type jsonObj = map[string]interface{}

// buildDocument converts every named type of the schema into an OpenAPI v3 component.
func buildDocument() ([]byte, error) {
	parser, err := typed.NewParser(typed.YAMLObject(builtinSchemaYAML))
	if err != nil {
		return nil, err
	}
	components := jsonObj{}
	for _, t := range parser.Schema.Types {
		if len(t.Name) > 1 && t.Name[:2] == "__" {
			continue
		}
		c := atom(t.Atom, nil)
		if t.Name == "io.k8s.api.core.v1.Pod" {
			c["x-kubernetes-group-version-kind"] = []jsonObj{{"group": "", "version": "v1", "kind": "Pod"}}
		}
		components[t.Name] = c
	}
	return json.Marshal(jsonObj{"openapi": "3.0.0", "info": jsonObj{"title": "Kubernetes", "version": "celcost"},
		"paths": jsonObj{}, "components": jsonObj{"schemas": components}})
}

func ref(t schema.TypeRef) jsonObj {
	if t.NamedType != nil {
		switch *t.NamedType {
		case "__untyped_atomic_":
			return jsonObj{"x-kubernetes-preserve-unknown-fields": true, "x-kubernetes-map-type": "atomic"}
		case "__untyped_deduced_":
			return jsonObj{"x-kubernetes-preserve-unknown-fields": true}
		}
		o := jsonObj{"$ref": "#/components/schemas/" + *t.NamedType}
		if t.ElementRelationship != nil {
			// An override of the named type's relationship: the OpenAPI form is an allOf with the
			// extension beside it.
			o = jsonObj{"allOf": []jsonObj{o}}
			switch *t.ElementRelationship {
			case schema.Atomic:
				o["x-kubernetes-map-type"] = "atomic"
			case schema.Separable:
				o["x-kubernetes-map-type"] = "granular"
			}
		}
		return o
	}
	return atom(t.Inlined, t.ElementRelationship)
}

func atom(a schema.Atom, rel *schema.ElementRelationship) jsonObj {
	switch {
	case a.Scalar != nil:
		switch *a.Scalar {
		case schema.String:
			return jsonObj{"type": "string"}
		case schema.Numeric:
			return jsonObj{"type": "number"}
		case schema.Boolean:
			return jsonObj{"type": "boolean"}
		default:
			return jsonObj{"type": "string", "format": "int-or-string"}
		}
	case a.List != nil:
		o := jsonObj{"type": "array", "items": ref(a.List.ElementType)}
		switch a.List.ElementRelationship {
		case schema.Atomic:
			o["x-kubernetes-list-type"] = "atomic"
		case schema.Associative:
			if len(a.List.Keys) > 0 {
				o["x-kubernetes-list-type"] = "map"
				o["x-kubernetes-list-map-keys"] = a.List.Keys
			} else {
				o["x-kubernetes-list-type"] = "set"
			}
		}
		return o
	case a.Map != nil:
		o := jsonObj{"type": "object"}
		if len(a.Map.Fields) > 0 {
			props := jsonObj{}
			for _, f := range a.Map.Fields {
				props[f.Name] = ref(f.Type)
			}
			o["properties"] = props
		}
		if a.Map.ElementType.NamedType != nil || a.Map.ElementType.Inlined != (schema.Atom{}) {
			o["additionalProperties"] = ref(a.Map.ElementType)
		}
		r := a.Map.ElementRelationship
		if rel != nil {
			r = *rel
		}
		if r == schema.Atomic {
			o["x-kubernetes-map-type"] = "atomic"
		}
		return o
	}
	return jsonObj{"x-kubernetes-preserve-unknown-fields": true}
}
