/** LabelValueMaxLength of apimachinery's pkg/util/validation/validation.go. */
export const LABEL_VALUE_MAX_LENGTH = 63;

// validation.IsValidLabelValue: at most 63 characters, empty or alphanumeric at both ends.
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Why Kubernetes refuses `v` as a label value (validation.IsValidLabelValue), or undefined when it takes it. */
export function labelValueProblem(v: string): string | undefined {
  if (v.length > LABEL_VALUE_MAX_LENGTH) return `must be at most ${LABEL_VALUE_MAX_LENGTH} characters, got ${v.length} (validation.IsValidLabelValue)`;
  return LABEL_VALUE.test(v)
    ? undefined
    : 'must be empty or begin and end with a letter or digit, with only letters, digits, "-", "_" and "." between (validation.IsValidLabelValue)';
}
