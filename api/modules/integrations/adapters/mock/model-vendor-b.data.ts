import type { DiscoveredModel } from '../contract.js';
import { vendorModel } from '../live-support.js';

/** The fictional models an account of vendor B may use, as the live adapter would report them (its models list). */
export const MOCK_VENDOR_B_MODELS: readonly DiscoveredModel[] = [
  'lumen-large-2411',
  'lumen-medium-2505',
  'lumen-small-2409',
  'lumen-code-25.01',
  'lumen-embed',
  'lumen-moderation-2411',
  'lumen-vision-12b',
].map((id) => vendorModel('model_vendor_b', id));
