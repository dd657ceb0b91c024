// celcost: the kube-apiserver's CEL cost of admission policies, computed with the apiserver's own
// CEL libraries (k8s.io/apiserver, cel-go).
//
//	celcost --policies policies.yaml [--pod pod.yaml]... [--old-pod old.yaml] [--namespace shop] [--namespace-label k=v]...
//
// It reads MutatingAdmissionPolicies and ValidatingAdmissionPolicies (a YAML or JSON stream, a List,
// or one object, as `sidecar-injector policies` prints them; other kinds are skipped) and prints one
// JSON object: per policy and expression the compile error the apiserver would refuse the policy
// with, the estimated cost (cel-go's estimator over the Pod's schema), and on each pod given the
// runtime cost the policy plugins charge, against the apiserver's limits. `problems` lists what the
// apiserver would refuse: a policy that does not compile (refused when written), an expression or a
// policy over its runtime limit on a given pod (the pod's admission fails). `warnings` lists
// estimates over a limit: some pod within the apiserver's request size would exceed it.
// With --old-pod, each pod is evaluated as an UPDATE of that pod (oldObject), not a CREATE. Per
// pod, `denials` lists the message of each validation that is false, as the plugin writes it.
// Exit status 0 when there are no problems, 1 when there are, 2 on bad input.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var policiesPath, namespace, oldPath string
	var podPaths, labels multiFlag
	flag.StringVar(&policiesPath, "policies", "", "policies file (YAML or JSON stream, List or object); - for standard input")
	flag.Var(&podPaths, "pod", "a pod (YAML or JSON) to evaluate the policies on; repeatable")
	flag.StringVar(&oldPath, "old-pod", "", "evaluate each pod as an UPDATE of this pod (YAML or JSON), oldObject, instead of a CREATE")
	flag.StringVar(&namespace, "namespace", "default", "the namespace of the pods' requests")
	flag.Var(&labels, "namespace-label", "a label k=v of that namespace; repeatable")
	flag.Parse()
	if policiesPath == "" {
		fatal(fmt.Errorf("--policies is required"))
	}
	mutating, validating, err := readPolicies(policiesPath)
	if err != nil {
		fatal(err)
	}
	var pods []*corev1.Pod
	for _, p := range podPaths {
		pod, err := readPod(p)
		if err != nil {
			fatal(fmt.Errorf("%s: %w", p, err))
		}
		pods = append(pods, pod)
	}
	var old *corev1.Pod
	if oldPath != "" {
		if old, err = readPod(oldPath); err != nil {
			fatal(fmt.Errorf("%s: %w", oldPath, err))
		}
	}
	ns := &corev1.Namespace{}
	ns.Name = namespace
	ns.Labels = map[string]string{"kubernetes.io/metadata.name": namespace}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		ns.Labels[k] = v
	}
	podType, err := podDeclType()
	if err != nil {
		fatal(fmt.Errorf("the Pod's schema: %w", err))
	}
	r := report{Limits: apiserverLimits()}
	for _, p := range mutating {
		r.Policies = append(r.Policies, measure(mutatingPolicy(p), podType, pods, old, ns))
	}
	for _, p := range validating {
		r.Policies = append(r.Policies, measure(validatingPolicy(p), podType, pods, old, ns))
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		fatal(err)
	}
	for _, p := range r.Policies {
		if len(p.Problems) > 0 {
			os.Exit(1)
		}
	}
}

// readPolicies decodes the admission policies of a stream; bindings and other kinds are skipped.
func readPolicies(path string) ([]*admissionregistrationv1.MutatingAdmissionPolicy, []*admissionregistrationv1.ValidatingAdmissionPolicy, error) {
	b, err := readInput(path)
	if err != nil {
		return nil, nil, err
	}
	var ms []*admissionregistrationv1.MutatingAdmissionPolicy
	var vs []*admissionregistrationv1.ValidatingAdmissionPolicy
	var add func(j []byte) error
	add = func(j []byte) error {
		var head struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(j, &head); err != nil {
			return err
		}
		switch head.Kind {
		case "List":
			for _, it := range head.Items {
				if err := add(it); err != nil {
					return err
				}
			}
		case "MutatingAdmissionPolicy":
			p := &admissionregistrationv1.MutatingAdmissionPolicy{}
			if err := json.Unmarshal(j, p); err != nil {
				return err
			}
			ms = append(ms, p)
		case "ValidatingAdmissionPolicy":
			p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			if err := json.Unmarshal(j, p); err != nil {
				return err
			}
			vs = append(vs, p)
		}
		return nil
	}
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(d) == "" {
			continue
		}
		j, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		if string(j) == "null" {
			continue
		}
		if err := add(j); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return ms, vs, nil
}

func readPod(path string) (*corev1.Pod, error) {
	b, err := readInput(path)
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	if err := yaml.Unmarshal(b, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

func readInput(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "celcost: %v\n", err)
	os.Exit(2)
}
