# Thin wrappers around the npm scripts (package.json) and kubectl/docker. `make help` lists them.
IMAGE ?= ghcr.io/sidecar-injector/sidecar-injector:0.1.0
KUBECTL ?= kubectl
DOCKER ?= docker

.DEFAULT_GOAL := help
.PHONY: help install build test lint run image install-yaml deploy undeploy

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

install: ## install dependencies exactly as locked (npm ci)
	npm ci

build: ## compile TypeScript to dist/ (npm run build)
	npm run build

test: ## typecheck and run every test (npm test)
	npm test

lint: ## typecheck, and check manifests/install.yaml is current (npm run lint)
	npm run lint

run: ## serve the bundled templates on https://localhost:8443 with a self-signed CA (npm start)
	npm start

image: ## build the container image $(IMAGE)
	$(DOCKER) build -t $(IMAGE) .

install-yaml: ## sync manifests/templates and render manifests/install.yaml (npm run install-yaml)
	npm run install-yaml

deploy: ## install into the current kubectl context (kubectl apply -k manifests/)
	$(KUBECTL) apply -k manifests/
	$(KUBECTL) -n sidecar-injector rollout status deployment/sidecar-injector --timeout=180s

undeploy: ## remove it: webhook configurations first, so nothing waits on a stopping injector
	$(KUBECTL) delete mutatingwebhookconfiguration,validatingwebhookconfiguration sidecar-injector --ignore-not-found
	$(KUBECTL) delete -k manifests/ --ignore-not-found
