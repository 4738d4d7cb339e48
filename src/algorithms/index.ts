export * from "./types.js";
export { ALGORITHMS, ALGORITHM_NAMES, DEFAULT_ALGORITHM, algorithmByCode, algorithmByName, type AlgorithmName } from "./registry.js";
export { floorDiv, ceilDiv } from "./integer.js";
export { MAX_COUNT } from "./charge.js";
