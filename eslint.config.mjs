// ESLint for the TypeScript sources, as the JupyterLab extension template configures it
// (flat config, typescript-eslint, the Jupyter plugin, prettier last so formatting is prettier's).
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';
import prettierRecommended from 'eslint-plugin-prettier/recommended';
import globals from 'globals';
import jupyterPlugin from '@jupyter/eslint-plugin';

export default defineConfig([
  {
    ignores: [
      'node_modules',
      '**/node_modules',
      'lib',
      'labextension',
      'coverage',
      '**/*.js',
      '**/*.d.ts',
      '.venv',
      // A separate Node package (its own package.json and lock) that drives the hub's browser check.
      'hub-tests'
    ]
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    plugins: {
      jupyter: jupyterPlugin
    }
  },
  jupyterPlugin.configs.recommended,
  {
    files: ['**/*.ts', '**/*.tsx'],
    languageOptions: {
      globals: {
        ...globals.browser,
        ...globals.es2015,
        ...globals.node
      },
      parserOptions: {
        // The extension's sources, and its jest tests (tsconfig.test.json adds src/__tests__).
        project: ['tsconfig.json', 'tsconfig.test.json'],
        sourceType: 'module'
      }
    },
    rules: {
      '@typescript-eslint/naming-convention': [
        'error',
        {
          selector: 'interface',
          format: ['PascalCase'],
          custom: {
            regex: '^I[A-Z]',
            match: true
          }
        }
      ],
      '@typescript-eslint/no-unused-vars': ['warn', { args: 'none' }],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-namespace': 'off',
      '@typescript-eslint/no-use-before-define': 'off',
      quotes: [
        'error',
        'single',
        { avoidEscape: true, allowTemplateLiterals: false }
      ],
      curly: ['error', 'all'],
      eqeqeq: 'error',
      'prefer-arrow-callback': 'error'
    }
  },
  {
    // The jest tests build untranslated inputs (schemas, fixtures) for the code under test to translate.
    files: ['src/__tests__/**/*.ts'],
    rules: {
      'jupyter/no-untranslated-string': 'off'
    }
  },
  {
    // The settings' enums are dtype and scheme identifiers, which read the same in every language.
    files: ['schema/*.json'],
    rules: {
      'jupyter/no-schema-enum': 'off'
    }
  },
  {
    // The Galata tests have no tsconfig of their own: they are linted without type information.
    files: ['ui-tests/**/*.ts'],
    languageOptions: {
      parserOptions: {
        project: null
      }
    }
  },
  prettierRecommended
]);
