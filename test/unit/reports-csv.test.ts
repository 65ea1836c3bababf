import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BOM, csvField, parseCsv, toCsv } from '../../api/modules/reports/csv.js';

/**
 * The reports' CSV (api/modules/reports/csv.ts): RFC 4180 quoting with CRLF records and a byte-order mark, and
 * the formula guard: a cell starting with = + - @, a tab or a carriage return gets a leading apostrophe.
 */

describe('report CSV', () => {
  it('starts with a byte-order mark and ends every record, the last included, with CRLF', () => {
    const text = toCsv(['a', 'b'], [
      [1, 'x'],
      [2, 'y'],
    ]);
    expect(text.startsWith(BOM)).toBe(true);
    expect(text.slice(1)).toBe('a,b\r\n1,x\r\n2,y\r\n');
  });

  it('quotes a field holding a comma, a quote, CR or LF, doubling its quotes', () => {
    expect(csvField('plain')).toBe('plain');
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField('two\nlines')).toBe('"two\nlines"');
    expect(csvField('cr\rhere')).toBe('"cr\rhere"');
  });

  it.each([
    ['=SUM(A1:A2)', "'=SUM(A1:A2)"],
    ['+441234', "'+441234"],
    ['-2+3', "'-2+3"],
    ['@import', "'@import"],
    ['\tcmd', "'\tcmd"],
    ['=HYPERLINK("http://x","y")', '"\'=HYPERLINK(""http://x"",""y"")"'],
  ])('guards %j against formula injection', (value, written) => {
    expect(csvField(value)).toBe(written);
  });

  it('guards a cell that starts with a carriage return, and quotes it', () => {
    expect(csvField('\r=1+1')).toBe('"\'\r=1+1"');
  });

  it('leaves cells alone that only contain those characters later', () => {
    expect(csvField('a=b')).toBe('a=b');
    expect(csvField('user@example.com')).toBe('user@example.com');
    expect(csvField('2026-11-23')).toBe('2026-11-23');
  });

  it('writes empty cells for null and undefined, joins arrays with "; ", dates as ISO, objects as JSON', () => {
    expect(csvField(null)).toBe('');
    expect(csvField(undefined)).toBe('');
    expect(csvField(['crm.lookup', 'crm.update'])).toBe('crm.lookup; crm.update');
    expect(csvField(new Date('2026-11-23T09:00:00Z'))).toBe('2026-11-23T09:00:00.000Z');
    expect(csvField({ a: 1 })).toBe('"{""a"":1}"');
    expect(csvField(true)).toBe('true');
    expect(csvField(0)).toBe('0');
  });

  it('a negative number is guarded too (it is text that starts with -)', () => {
    expect(csvField(-4)).toBe("'-4");
  });

  it('reads back what it writes, whatever the text (the guard adds its apostrophe)', () => {
    fc.assert(
      fc.property(fc.array(fc.array(fc.string(), { minLength: 2, maxLength: 2 }), { maxLength: 5 }), (rows) => {
        const parsed = parseCsv(toCsv(['first', 'second'], rows));
        const guarded = (s: string) => (/^[=+\-@\t\r]/.test(s) ? `'${s}` : s);
        expect(parsed).toEqual([['first', 'second'], ...rows.map((r) => r.map(guarded))]);
      }),
    );
  });
});
