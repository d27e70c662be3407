export { dns1123SubdomainProblem, labelKeyProblem, labelValueProblem } from "./syntax.ts";
export { labelSelectorFromObject, LabelSelectorError, parseLabelSelector, type LabelMatcher, type Labels } from "./selector.ts";
