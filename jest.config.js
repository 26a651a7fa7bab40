// Jest runs the pure TypeScript logic of the side panel (formatting, grouping,
// validation, binding, rendering) through ts-jest; the real flows run in a
// real browser with Galata (ui-tests/).
module.exports = {
  testEnvironment: 'node',
  transform: {
    '^.+\\.tsx?$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }]
  },
  testRegex: 'src/__tests__/.*\\.spec\\.ts$',
  moduleFileExtensions: ['ts', 'tsx', 'js', 'json'],
  modulePathIgnorePatterns: [
    '<rootDir>/lib/',
    '<rootDir>/labextension/',
    '<rootDir>/ui-tests/',
    '<rootDir>/.venv/'
  ]
};
