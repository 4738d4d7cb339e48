export * from "./types.js";
export { ALGORITHMS, DEFAULT_ALGORITHM, algorithmByCode, algorithmByName } from "./registry.js";
export { floorDiv, ceilDiv } from "./integer.js";
