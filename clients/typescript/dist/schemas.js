export {};
//# sourceMappingURL=schemas.js.map