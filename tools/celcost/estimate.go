package main

// Estimated cost: cel-go's estimator (env.EstimateCost) with the apiserver's library.CostEstimator
// (the cost of the Kubernetes CEL libraries' functions), over an environment declared as the
// ValidatingAdmissionPolicy type checker declares it (validating/typechecking.go: object and
// oldObject typed from the resource's schema, request and namespaceObject from plugincel's
// types), plus the JSONPatch and Object types for mutations. Sizes come from the schema: a list,
// map or string without maxItems/maxLength is bounded by what fits in the apiserver's 3 MiB
// request (common.SchemaDeclType's estimate), which is how the apiserver bounds CRD rules too.
// The apiserver does not refuse an admission policy for its estimate; the estimate says what the
// largest pod the apiserver accepts could cost.

import (
	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/checker"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	"k8s.io/apiserver/pkg/cel/mutation"
	"k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clientopenapi "k8s.io/client-go/openapi"
)

type podSchema = *apiservercel.DeclType

// podDeclType resolves the Pod's schema through discovery's OpenAPI v3 (as the type checker's
// ClientDiscoveryResolver does) from client-go's schema of the built-in types (openapi.go).
func podDeclType() (podSchema, error) {
	r := &resolver.ClientDiscoveryResolver{Discovery: openAPIDiscovery{&fakediscovery.FakeDiscovery{}}}
	s, err := r.ResolveSchema(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
	if err != nil {
		return nil, err
	}
	return common.SchemaDeclType(&openapi.Schema{Schema: s}, true).MaybeAssignTypeName("Pod"), nil
}

type openAPIDiscovery struct {
	*fakediscovery.FakeDiscovery
}

func (openAPIDiscovery) OpenAPIV3() clientopenapi.Client { return coreV1OpenAPI{} }

type estimateResult struct {
	cost checker.CostEstimate
	err  string
}

// estimate: per field, the estimated cost of each expression of the policy, or why there is none.
func estimate(p policy, pod podSchema) map[string]estimateResult {
	roots := map[string]*apiservercel.DeclType{
		plugincel.ObjectVarName:    pod,
		plugincel.OldObjectVarName: pod,
		plugincel.RequestVarName:   plugincel.BuildRequestType(),
		plugincel.NamespaceVarName: plugincel.BuildNamespaceType(),
	}
	env, err := typedEnv(roots, p.mutating)
	if err != nil {
		panic(err)
	}
	c, err := plugincel.NewCompositedCompilerForTypeChecking(env)
	if err != nil {
		panic(err)
	}
	e := &estimator{composited: c, sizes: sizes{roots}, results: map[string]estimateResult{}}
	c.Compiler = e
	out := map[string]estimateResult{}
	for _, v := range p.variables {
		// Stores the variable's type for the expressions that read it, as the plugins do.
		c.CompileAndStoreVariable(v.named(), options(false), environment.StoredExpressions)
		out[v.field] = e.results[v.accessor.GetExpression()]
	}
	for _, x := range p.all()[len(p.variables):] {
		e.CompileCELExpression(x.accessor, options(p.mutating), environment.StoredExpressions)
		out[x.field] = e.results[x.accessor.GetExpression()]
	}
	return out
}

// typedEnv: the base environment with the variables typed (validating/typechecking.go's buildEnvSet).
func typedEnv(roots map[string]*apiservercel.DeclType, patchTypes bool) (*environment.EnvSet, error) {
	opts := []cel.EnvOption{cel.Variable(plugincel.AuthorizerVarName, library.AuthorizerType)}
	var decls []*apiservercel.DeclType
	for name, t := range roots {
		opts = append(opts, cel.Variable(name, t.CelType()))
		if name != plugincel.OldObjectVarName {
			decls = append(decls, t)
		}
	}
	env, err := baseEnv().Extend(environment.VersionedOptions{IntroducedVersion: version.MajorMinor(1, 0), EnvOptions: opts, DeclTypes: decls})
	if err != nil || !patchTypes {
		return env, err
	}
	// What plugincel adds for mutations (compile.go's hasPatchTypes).
	return env.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{
			common.ResolverEnvOption(&mutation.DynamicTypeResolver{}),
			environment.UnversionedLib(library.JSONPatch),
		},
	})
}

// estimator is the CompositedCompiler's compiler: it type-checks each expression in the typed
// environment and estimates its cost; it makes no program.
type estimator struct {
	composited *plugincel.CompositedCompiler
	sizes      sizes
	results    map[string]estimateResult
}

func (e *estimator) CompileCELExpression(a plugincel.ExpressionAccessor, _ plugincel.OptionalVariableDeclarations, mode environment.Type) plugincel.CompilationResult {
	fail := func(msg string) plugincel.CompilationResult {
		e.results[a.GetExpression()] = estimateResult{err: msg}
		return plugincel.CompilationResult{ExpressionAccessor: a, Error: &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: msg}}
	}
	env, err := e.composited.Env(mode)
	if err != nil {
		return fail(err.Error())
	}
	ast, issues := env.Compile(a.GetExpression())
	if issues != nil {
		return fail(issues.String())
	}
	cost, err := env.EstimateCost(ast, &library.CostEstimator{SizeEstimator: e.sizes})
	if err != nil {
		return fail(err.Error())
	}
	e.results[a.GetExpression()] = estimateResult{cost: cost}
	return plugincel.CompilationResult{ExpressionAccessor: a, OutputType: ast.OutputType()}
}

// sizes gives cel-go the largest size of a value reached from a typed variable: the MaxElements
// of the declared type at the node's path (variable, then field names, @items, @keys, @values).
type sizes struct {
	roots map[string]*apiservercel.DeclType
}

func (s sizes) EstimateSize(node checker.AstNode) *checker.SizeEstimate {
	path := node.Path()
	if len(path) == 0 {
		return nil
	}
	t := s.roots[path[0]]
	for _, step := range path[1:] {
		if t == nil {
			return nil
		}
		switch step {
		case "@items", "@values":
			t = t.ElemType
		case "@keys":
			t = t.KeyType
		default:
			f, ok := t.Fields[step]
			if !ok {
				return nil
			}
			t = f.Type
		}
	}
	if t == nil || t.MaxElements <= 0 {
		return nil
	}
	return &checker.SizeEstimate{Min: 0, Max: uint64(t.MaxElements)}
}

func (sizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}
