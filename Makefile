# Thin wrappers around the npm scripts (package.json) and kubectl/docker. `make help` lists them.
IMAGE ?= ghcr.io/sidecar-injector/sidecar-injector:0.1.0
# What `make deploy` installs: base (self-managed certificates) or overlays/cert-manager.
OVERLAY ?= base
# Where `make helm-deploy` installs the chart, and more flags for it (e.g. HELM_ARGS='--set replicas=3').
RELEASE ?= sidecar-injector
NAMESPACE ?= sidecar-injector
HELM_ARGS ?=
KUBECTL ?= kubectl
HELM ?= helm
DOCKER ?= docker

.DEFAULT_GOAL := help
.PHONY: help install build test lint run image docker-push install-yaml deploy helm-deploy undeploy

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

install: ## install dependencies exactly as locked (npm ci)
	npm ci

build: ## compile TypeScript to dist/ (npm run build)
	npm run build

test: ## typecheck and run every test (npm test)
	npm test

lint: ## typecheck, ESLint, the layer check (dependency-cruiser), Prettier, generated files current (npm run lint)
	npm run lint

run: ## serve the bundled templates on https://localhost:8443 with a self-signed CA (npm start)
	npm start

image: ## build the container image $(IMAGE)
	$(DOCKER) build -t $(IMAGE) .

docker-push: image ## build and push the container image $(IMAGE)
	$(DOCKER) push $(IMAGE)

install-yaml: ## sync the template copies, render manifests/install.yaml and src/generated/shipped-webhooks.ts with real kustomize
	npm run install-yaml

deploy: ## install manifests/$(OVERLAY) with image $(IMAGE) into the current kubectl context
	sh scripts/deploy.sh kustomization '$(IMAGE)' '$(OVERLAY)' .deploy
	$(KUBECTL) apply -k .deploy
	$(KUBECTL) -n sidecar-injector rollout status deployment/sidecar-injector --timeout=180s

helm-deploy: ## install or upgrade the Helm chart with image $(IMAGE) as $(RELEASE) in $(NAMESPACE)
	$(HELM) upgrade --install $(RELEASE) charts/sidecar-injector --namespace $(NAMESPACE) --create-namespace $$(sh scripts/deploy.sh helm-args '$(IMAGE)') $(HELM_ARGS) --wait --timeout 180s

undeploy: ## remove what deploy installed: webhook configurations first, so nothing waits on a stopping injector
	$(KUBECTL) delete mutatingwebhookconfiguration,validatingwebhookconfiguration sidecar-injector --ignore-not-found
	$(KUBECTL) delete -k manifests/$(OVERLAY) --ignore-not-found
