package main

// The three measures of a policy, each with the apiserver's own code:
//   - compile: plugincel.CompositedCompiler over the base environment the policy plugins and the
//     apiserver's write-time validation use (environment.MustBaseEnvSet at the default compatibility
//     version), NewExpressions mode as for a policy being written: an error here is a policy the
//     apiserver refuses to store;
//   - estimate: cel-go's cost estimator with the apiserver's library.CostEstimator, over an
//     environment whose object and oldObject have the Pod's type from its OpenAPI schema
//     (common.SchemaDeclType, as the ValidatingAdmissionPolicy type checker builds it), so a list or
//     string without maxItems/maxLength is bounded by what fits in the apiserver's 3 MiB request;
//   - runtime: the expressions compiled as the plugins compile them (StoredExpressions) and
//     evaluated by plugincel's ForInput on each pod's CREATE (or UPDATE from --old-pod), with the
//     plugins' budgets; the cost charged is the budget given less the budget ForInput returns.

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"cel.dev/cel-go/common/types"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/cel/environment"
)

type limits struct {
	// PerCall: the cost at which one evaluation of one expression is cancelled.
	PerCall int64 `json:"perCall"`
	// PerPolicy: the budget of one mutation of a MutatingAdmissionPolicy, or of all validations
	// (and their messages) of a ValidatingAdmissionPolicy binding.
	PerPolicy int64 `json:"perPolicy"`
	// MatchConditions: the budget of a policy's matchConditions together.
	MatchConditions int64 `json:"matchConditions"`
}

// apiserverLimits: k8s.io/apiserver/pkg/apis/cel/config.go, as the policy plugins use them.
func apiserverLimits() limits {
	return limits{celconfig.PerCallLimit, celconfig.RuntimeCELCostBudget, celconfig.RuntimeCELCostBudgetMatchConditions}
}

type report struct {
	Limits   limits         `json:"limits"`
	Policies []policyReport `json:"policies"`
}

type policyReport struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Estimated: the sum of every expression's estimate, variables counted once.
	Estimated   costRange `json:"estimated"`
	estMin      uint64
	estMax      uint64
	Expressions []expressionReport `json:"expressions"`
	Pods        []podReport        `json:"pods"`
	// Problems: what the apiserver would refuse (the policy, or a given pod's admission).
	Problems []string `json:"problems"`
	// Warnings: estimates over a limit.
	Warnings []string `json:"warnings"`
}

// costRange: cel-go's estimate. A bound cel-go cannot find (a size it cannot trace to the schema,
// such as a string reached through an optional field, or lists.range of a computed number) is
// math.MaxUint64; it is written as null, with unbounded true.
type costRange struct {
	Min       *uint64 `json:"min"`
	Max       *uint64 `json:"max"`
	Unbounded bool    `json:"unbounded,omitempty"`
}

func newCostRange(min, max uint64) costRange {
	bounded := func(v uint64) *uint64 {
		if v == math.MaxUint64 {
			return nil
		}
		return &v
	}
	return costRange{Min: bounded(min), Max: bounded(max), Unbounded: max == math.MaxUint64}
}

type expressionReport struct {
	Field string `json:"field"`
	// Error: the compile error the apiserver refuses the policy with.
	Error string `json:"error,omitempty"`
	// TypeError: the expression does not type-check against the Pod's schema (no estimate then).
	TypeError string     `json:"typeError,omitempty"`
	Estimated *costRange `json:"estimated,omitempty"`
	// Runtime: per pod, the cost of evaluating this expression alone (the variables it reads included).
	Runtime []runtimeCost `json:"runtime,omitempty"`
}

type runtimeCost struct {
	// Index: the pod's place among the --pod flags (names repeat: a controller's pods share a generateName).
	Index int    `json:"index"`
	Pod   string `json:"pod"`
	Cost  int64  `json:"cost"`
	Error string `json:"error,omitempty"`
}

type podReport struct {
	Index int    `json:"index"`
	Pod   string `json:"pod"`
	// Matched: every matchCondition was true, so the plugin went on to the checks.
	Matched bool `json:"matched"`
	// Cost: what the plugin charged for the pod (matchConditions, then each mutation or the validations).
	Cost int64 `json:"cost"`
	// Milliseconds: the time the plugin's evaluation took on this machine (ForInput; compiling excluded):
	// the apiserver limits the cost, not the time.
	Milliseconds float64 `json:"ms"`
	Error        string  `json:"error,omitempty"`
	// Denials: the message of each validation that is false (validating policies), in order.
	Denials []string `json:"denials,omitempty"`
}

// measure compiles, estimates and runs one policy on the pods.
func measure(p policy, podType podSchema, pods []*corev1.Pod, old *corev1.Pod, ns *corev1.Namespace) policyReport {
	lim := apiserverLimits()
	r := policyReport{Kind: p.kind, Name: p.name, Pods: []podReport{}, Problems: []string{}, Warnings: []string{}}
	compiled := compileErrors(p)
	estimates := estimate(p, podType)
	byField := map[string]*expressionReport{}
	unbounded := 0
	for _, e := range p.all() {
		er := expressionReport{Field: e.field, Error: compiled[e.field]}
		if er.Error != "" {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: the apiserver refuses the policy: %s", e.field, oneLine(er.Error)))
		}
		if est, ok := estimates[e.field]; ok && est.err == "" {
			cr := newCostRange(est.cost.Min, est.cost.Max)
			er.Estimated = &cr
			r.estMin = addSat(r.estMin, est.cost.Min)
			r.estMax = addSat(r.estMax, est.cost.Max)
			if est.cost.Max == math.MaxUint64 {
				unbounded++
			} else if est.cost.Max > uint64(lim.PerCall) {
				r.Warnings = append(r.Warnings, fmt.Sprintf("%s: estimated cost up to %d, over the per-expression limit %d for the largest pods", e.field, est.cost.Max, lim.PerCall))
			}
		} else if ok && er.Error == "" {
			er.TypeError = est.err
		}
		r.Expressions = append(r.Expressions, er)
	}
	r.Estimated = newCostRange(r.estMin, r.estMax)
	if unbounded > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d of %d expressions have no estimated bound (cel-go cannot trace a size to the Pod's schema); only the runtime limits bound them", unbounded, len(r.Expressions)))
	}
	for i := range r.Expressions {
		byField[r.Expressions[i].Field] = &r.Expressions[i]
	}
	if len(r.Problems) > 0 {
		return r
	}
	for i, pod := range pods {
		name := podName(pod, i)
		pr := run(p, pod, old, ns, i, name, byField)
		if pr.Error != "" {
			r.Problems = append(r.Problems, fmt.Sprintf("pod %s: the apiserver fails its admission: %s", name, oneLine(pr.Error)))
		}
		r.Pods = append(r.Pods, pr)
	}
	return r
}

// oneLine: a CEL error's first line (cel-go adds the expression and a caret below it).
func oneLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(first)
}

func addSat(a, b uint64) uint64 {
	if a+b < a {
		return ^uint64(0)
	}
	return a + b
}

func podName(pod *corev1.Pod, i int) string {
	switch {
	case pod.Name != "":
		return pod.Name
	case pod.GenerateName != "":
		return pod.GenerateName
	}
	return fmt.Sprintf("pod[%d]", i)
}

// options: what the plugins declare for a policy without paramKind (every policy has an
// authorizer; mutations also get the JSONPatch and Object types).
func options(patchTypes bool) plugincel.OptionalVariableDeclarations {
	return plugincel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true, HasPatchTypes: patchTypes}
}

func baseEnv() *environment.EnvSet {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
}

// compileErrors compiles every expression as the apiserver does when the policy is written.
func compileErrors(p policy) map[string]string {
	out := map[string]string{}
	c, err := plugincel.NewCompositedCompiler(baseEnv())
	if err != nil {
		panic(err)
	}
	for _, v := range p.variables {
		if res := c.CompileAndStoreVariable(v.named(), options(false), environment.NewExpressions); res.Error != nil {
			out[v.field] = res.Error.Error()
		}
	}
	for _, e := range p.matchConditions {
		if res := c.CompileCELExpression(e.accessor, options(false), environment.NewExpressions); res.Error != nil {
			out[e.field] = res.Error.Error()
		}
	}
	for i, e := range p.checks {
		if res := c.CompileCELExpression(e.accessor, options(p.mutating), environment.NewExpressions); res.Error != nil {
			out[e.field] = res.Error.Error()
		}
		if i < len(p.messages) && p.messages[i] != nil {
			m := p.messages[i]
			if res := c.CompileCELExpression(m.accessor, options(false), environment.NewExpressions); res.Error != nil {
				out[m.field] = res.Error.Error()
			}
		}
	}
	return out
}

// run evaluates the policy on one pod's CREATE (an UPDATE when old is given) as the plugin does: matchConditions together with
// their budget; when all are true, each mutation with the per-policy budget, or the validations
// together with it and the messages of those that fail from what is left. Each expression is also
// evaluated alone for its own figure.
func run(p policy, pod, old *corev1.Pod, ns *corev1.Namespace, index int, name string, byField map[string]*expressionReport) podReport {
	c, err := plugincel.NewCompositedCompiler(baseEnv())
	if err != nil {
		panic(err)
	}
	for _, v := range p.variables {
		c.CompileAndStoreVariable(v.named(), options(false), environment.StoredExpressions)
	}
	r := runner{in: newInput(pod, old, ns), c: c, index: index, name: name, byField: byField, lim: apiserverLimits()}
	pr := r.pass(p)
	pr.Milliseconds = float64(r.in.elapsed.Microseconds()) / 1000
	// Again, recording each expression alone: the timed pass above is the plugin's work only.
	r.record = true
	r.pass(p)
	return pr
}

// pass: the plugin's evaluation of the policy on the pod.
func (r runner) pass(p policy) podReport {
	pr := podReport{Index: r.index, Pod: r.name}
	pr.Matched, pr.Cost, pr.Error = r.match(p.matchConditions)
	if !pr.Matched || pr.Error != "" {
		return pr
	}
	var cost int64
	if p.mutating {
		cost, pr.Error = r.mutate(p.checks)
	} else {
		cost, pr.Denials, pr.Error = r.validate(p.checks, p.messages)
	}
	pr.Cost += cost
	return pr
}

// runner evaluates one policy's expressions on one pod, recording each expression's cost alone.
type runner struct {
	in      input
	c       *plugincel.CompositedCompiler
	index   int
	name    string
	byField map[string]*expressionReport
	lim     limits
	// record: also evaluate each expression alone and record its cost in byField.
	record bool
}

// alone records the cost of one expression evaluated by itself with the budget.
func (r runner) alone(e expression, isMutation bool, budget int64) {
	if !r.record {
		return
	}
	var cost int64
	var err error
	if isMutation {
		cost, err = r.in.mutation(r.c, e, budget)
	} else {
		cost, err = r.in.conditions(r.c, []expression{e}, false, budget)
	}
	r.byField[e.field].Runtime = append(r.byField[e.field].Runtime, runtimeCost{Index: r.index, Pod: r.name, Cost: cost, Error: errText(err)})
}

// match: whether every matchCondition is true (none: true), the cost charged, and the error that fails the policy.
func (r runner) match(conditions []expression) (bool, int64, string) {
	for _, e := range conditions {
		r.alone(e, false, r.lim.MatchConditions)
	}
	results, remaining, err := r.in.evaluate(r.c, conditions, false, r.lim.MatchConditions)
	if err != nil {
		return false, r.lim.MatchConditions, "matchConditions: " + err.Error()
	}
	cost := r.lim.MatchConditions - remaining
	for _, res := range results {
		if res.Error != nil {
			return false, cost, res.Error.Error()
		}
		if res.EvalResult != types.True {
			return false, cost, ""
		}
	}
	return true, cost, ""
}

// mutate: each mutation with the per-policy budget, as the mutating dispatcher gives each patcher.
func (r runner) mutate(mutations []expression) (int64, string) {
	var total int64
	for _, e := range mutations {
		r.alone(e, true, r.lim.PerPolicy)
		cost, err := r.in.mutation(r.c, e, r.lim.PerPolicy)
		total += cost
		if err != nil {
			return total, e.field + ": " + err.Error()
		}
	}
	return total, ""
}

// validate: the validations together with the per-policy budget, then the messageExpression of each
// that is false from what is left, as the validating plugin's validator does; the cost, the
// messages of the validations that are false, and the error.
func (r runner) validate(validations []expression, messages []*expression) (int64, []string, string) {
	for _, e := range validations {
		r.alone(e, false, r.lim.PerPolicy)
	}
	results, remaining, err := r.in.evaluate(r.c, validations, false, r.lim.PerPolicy)
	if err != nil {
		return r.lim.PerPolicy, nil, "validations: " + err.Error()
	}
	total := r.lim.PerPolicy - remaining
	var denials []string
	for i, res := range results {
		if res.Error != nil {
			return total, denials, validations[i].field + ": " + res.Error.Error()
		}
		if res.EvalResult == types.True {
			continue
		}
		if i >= len(messages) || messages[i] == nil {
			denials = append(denials, validations[i].field)
			continue
		}
		m := *messages[i]
		r.alone(m, false, remaining)
		out, left, err := r.in.evaluate(r.c, []expression{m}, false, remaining)
		if err == nil && len(out) == 1 && out[0].Error != nil {
			err = out[0].Error
		}
		total += remaining - left
		remaining = left
		if err != nil {
			return total, denials, m.field + ": " + err.Error()
		}
		denials = append(denials, fmt.Sprint(out[0].EvalResult.Value()))
	}
	return total, denials, ""
}

// input: one pod's CREATE, or UPDATE from old, as the plugins see it.
type input struct {
	attr      *admission.VersionedAttributes
	request   *admissionv1.AdmissionRequest
	namespace *corev1.Namespace
	vars      plugincel.OptionalVariableBindings
	// elapsed: the time spent in ForInput (evaluation, not compilation) so far.
	elapsed *time.Duration
}

func newInput(pod, old *corev1.Pod, ns *corev1.Namespace) input {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	var a admission.Attributes
	versioned := &admission.VersionedAttributes{VersionedObject: pod, VersionedKind: gvk}
	if old == nil {
		a = admission.NewAttributesRecord(pod, nil, gvk, ns.Name, pod.Name, gvr, "", admission.Create, &metav1.CreateOptions{}, false,
			&user.DefaultInfo{Name: "system:serviceaccount:kube-system:replicaset-controller"})
	} else {
		a = admission.NewAttributesRecord(pod, old, gvk, ns.Name, pod.Name, gvr, "", admission.Update, &metav1.UpdateOptions{}, false,
			&user.DefaultInfo{Name: "kubernetes-admin"})
		versioned.VersionedOldObject = old
	}
	versioned.Attributes = a
	return input{
		attr:      versioned,
		request:   plugincel.CreateAdmissionRequest(a, metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}),
		namespace: plugincel.CreateNamespaceObject(ns),
		vars:      plugincel.OptionalVariableBindings{Authorizer: authorizerfactory.NewAlwaysAllowAuthorizer()},
		elapsed:   new(time.Duration),
	}
}

// evaluate runs conditions together with one budget, as ForInput does for a plugin.
func (in input) evaluate(c *plugincel.CompositedCompiler, es []expression, patchTypes bool, budget int64) ([]plugincel.EvaluationResult, int64, error) {
	accessors := make([]plugincel.ExpressionAccessor, len(es))
	for i, e := range es {
		accessors[i] = e.accessor
	}
	ev := c.CompileCondition(accessors, options(patchTypes), environment.StoredExpressions)
	start := time.Now()
	defer func() { *in.elapsed += time.Since(start) }()
	return ev.ForInput(context.Background(), in.attr, in.request, in.vars, in.namespace, budget)
}

// conditions: the cost charged for evaluating es together, and the first error.
func (in input) conditions(c *plugincel.CompositedCompiler, es []expression, patchTypes bool, budget int64) (int64, error) {
	results, remaining, err := in.evaluate(c, es, patchTypes, budget)
	if err != nil {
		return budget, err
	}
	for _, r := range results {
		if r.Error != nil {
			return budget - remaining, r.Error
		}
	}
	return budget - remaining, nil
}

// mutation: the cost charged for one mutation, and its error.
func (in input) mutation(c *plugincel.CompositedCompiler, e expression, budget int64) (int64, error) {
	ev := c.CompileMutatingEvaluator(e.accessor, options(true), environment.StoredExpressions)
	// The mutating dispatcher makes the composition context (variables) itself, once per policy invocation.
	start := time.Now()
	res, remaining, err := ev.ForInput(c.CreateContext(context.Background()), in.attr, in.request, in.vars, in.namespace, budget)
	*in.elapsed += time.Since(start)
	if err != nil {
		return budget, err
	}
	if res.Error != nil {
		return budget - remaining, res.Error
	}
	return budget - remaining, nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
