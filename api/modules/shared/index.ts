/** Enumerations and the secret scanner every module may use. */
export * from './enums.js';
export * from './secret-scanner.js';
