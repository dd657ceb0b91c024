package main

// An admission policy as a list of CEL expressions, each named by its field path, in the order
// and the groups the apiserver's policy plugins evaluate them.

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
)

// expression is one CEL expression of a policy and where it sits.
type expression struct {
	field    string
	accessor plugincel.ExpressionAccessor
}

// policy holds what the plugins compile: variables (lazily evaluated, charged to the expression
// that reads them first), matchConditions (their own budget), then the checks: each mutation of a
// MutatingAdmissionPolicy with the full per-policy budget, or the validations of a
// ValidatingAdmissionPolicy sharing it, their messageExpressions from what is left.
type policy struct {
	kind, name      string
	mutating        bool
	variables       []variable
	matchConditions []expression
	checks          []expression
	// messages[i] is checks[i]'s messageExpression, if any (validating only).
	messages []*expression
}

type variable struct {
	expression
	name string
}

func (v variable) named() plugincel.NamedExpressionAccessor {
	return &validating.Variable{Name: v.name, Expression: v.accessor.GetExpression()}
}

func mutatingPolicy(p *admissionregistrationv1.MutatingAdmissionPolicy) policy {
	out := policy{kind: "MutatingAdmissionPolicy", name: p.Name, mutating: true}
	out.variables = variables(p.Spec.Variables)
	out.matchConditions = matchConditionList(p.Spec.MatchConditions)
	for i, m := range p.Spec.Mutations {
		switch {
		case m.JSONPatch != nil:
			out.checks = append(out.checks, expression{fmt.Sprintf("spec.mutations[%d].jsonPatch.expression", i), &patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}})
		case m.ApplyConfiguration != nil:
			out.checks = append(out.checks, expression{fmt.Sprintf("spec.mutations[%d].applyConfiguration.expression", i), &patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}})
		}
	}
	return out
}

func validatingPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) policy {
	out := policy{kind: "ValidatingAdmissionPolicy", name: p.Name}
	out.variables = variables(p.Spec.Variables)
	out.matchConditions = matchConditionList(p.Spec.MatchConditions)
	for i, v := range p.Spec.Validations {
		out.checks = append(out.checks, expression{fmt.Sprintf("spec.validations[%d].expression", i), &validating.ValidationCondition{Expression: v.Expression}})
		var msg *expression
		if v.MessageExpression != "" {
			msg = &expression{fmt.Sprintf("spec.validations[%d].messageExpression", i), &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}}
		}
		out.messages = append(out.messages, msg)
	}
	return out
}

func variables(vs []admissionregistrationv1.Variable) []variable {
	out := make([]variable, 0, len(vs))
	for i, v := range vs {
		out = append(out, variable{expression{fmt.Sprintf("spec.variables[%d].expression", i), &validating.Variable{Name: v.Name, Expression: v.Expression}}, v.Name})
	}
	return out
}

func matchConditionList(mcs []admissionregistrationv1.MatchCondition) []expression {
	out := make([]expression, 0, len(mcs))
	for i := range mcs {
		out = append(out, expression{fmt.Sprintf("spec.matchConditions[%d].expression", i), (*matchconditions.MatchCondition)(&mcs[i])})
	}
	return out
}

// all lists every expression in report order: variables, matchConditions, checks, messages.
func (p policy) all() []expression {
	var out []expression
	for _, v := range p.variables {
		out = append(out, v.expression)
	}
	out = append(out, p.matchConditions...)
	for i, c := range p.checks {
		out = append(out, c)
		if i < len(p.messages) && p.messages[i] != nil {
			out = append(out, *p.messages[i])
		}
	}
	return out
}
