# syntax=docker/dockerfile:1
# Multi-stage: build with the full toolchain, ship production dependencies and compiled JS only, on a
# distroless Node LTS image that runs as a non-root user with no shell or package manager.

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# The image build has no .git: `docker build --build-arg GIT_COMMIT=$(git rev-parse HEAD)` lets `version` name the commit.
ARG GIT_COMMIT=""
RUN npm run build

FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM gcr.io/distroless/nodejs24-debian12:nonroot
WORKDIR /app
ENV NODE_ENV=production
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY templates ./templates
USER 65532:65532
EXPOSE 8443 8081
# node itself is PID 1, so SIGTERM reaches the injector's graceful shutdown directly; never
# `npm start`, which does not forward signals. The script is part of the entrypoint, so a pod's
# `args` (manifests/base/deployment.yaml: serve --cert-secret=...) are the subcommand and its flags.
# --max-semi-space-size=4: V8's young generation grows to 2 x 16 MiB under a steady stream of
# reviews; each review's garbage dies young, so 4 MiB semi-spaces cost no measurable CPU and keep
# ~30 MB of RSS off the Deployment's 256 MiB limit (docs/performance.md, "Memory"; npm run bench starts
# the product with the flags of this line).
ENTRYPOINT ["/nodejs/bin/node", "--max-semi-space-size=4", "/app/dist/src/cli/index.js"]
CMD ["serve"]
