// ESLint with typescript-eslint: a small rule set for bugs and dead code, not style (style is
// Prettier's, .prettierrc.json). Untyped on purpose: the typed rules (no-floating-promises) need a
// full type-check per run, minutes on a shared CI machine, and `npm run typecheck` already runs tsc.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.tools/', '.certs/', 'src/generated/', 'charts/', 'manifests/', 'templates/', 'test/fixtures/', 'bench/profiles/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports', disallowTypeAnnotations: false }],
    },
  },
  {
    // Tests and the benchmark feed hostile and partial objects on purpose; scripts walk untyped YAML.
    files: ['test/**', 'bench/**', 'scripts/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { require: 'readonly', module: 'writable' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', Buffer: 'readonly', console: 'readonly', performance: 'readonly' } },
  },
);
