import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { pricingOut, type Pricing } from './public.schemas.js';

/**
 * The indicative pricing the website shows, from the data file beside this module (schema version 1; the build
 * must copy it beside the compiled module, as it does the framework files). Read and checked once when the
 * module loads: a missing or malformed file stops the process at start instead of answering 500 later.
 */
export function loadPricing(file = fileURLToPath(new URL('./pricing.json', import.meta.url))): Pricing {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`the pricing file is missing (looked for ${file}): ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  const parsed = pricingOut.safeParse(JSON.parse(text));
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`);
    throw new Error(`the pricing file ${file} does not follow schema version 1:\n  ${problems.join('\n  ')}`);
  }
  return parsed.data;
}

export const PRICING: Pricing = loadPricing();
