import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LABEL_VALUE_MAX_LENGTH, labelValueProblem } from '../../src/kube-values/label.js';

// The cases of apimachinery's TestIsValidLabelValue (pkg/util/validation/validation_test.go).
describe('label values (validation.IsValidLabelValue)', () => {
  it('takes the empty value and values alphanumeric at both ends, up to 63 characters', () => {
    for (const v of [
      '',
      'simple',
      'now-with-dashes',
      '1-starts-with-num',
      'end-with-num-1',
      '1234',
      'A',
      'AZ',
      'a_z',
      'a.z',
      'a.b_c-d',
      'x'.repeat(LABEL_VALUE_MAX_LENGTH),
    ]) {
      assert.equal(labelValueProblem(v), undefined, v);
    }
  });

  it('refuses a value that begins or ends with a symbol, holds another character, or is longer than 63', () => {
    for (const v of [
      'nospecialchars%^=@',
      'Tama-nui-te-rā.is.Māori.sun',
      '\\backslashes\\',
      '-starts-with-dash',
      'ends-with-dash-',
      '.starts.with.dot',
      'ends.with.dot.',
      'web-7d9f8b6c5-',
    ]) {
      assert.match(labelValueProblem(v) ?? '', /must be empty or begin and end with a letter or digit/, v);
    }
    assert.equal(labelValueProblem('x'.repeat(64)), 'must be at most 63 characters, got 64 (validation.IsValidLabelValue)');
  });
});
