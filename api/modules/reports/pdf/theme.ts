/** The look of every report: fonts (pdfkit's built-in Helvetica, no font files), sizes and colours. */

export const FONT = { regular: 'Helvetica', bold: 'Helvetica-Bold', italic: 'Helvetica-Oblique' } as const;

export const SIZE = { title: 26, subtitle: 12, h1: 15, h2: 11.5, body: 9.5, table: 8, small: 7.5, footer: 7.5 } as const;

export const COLOUR = {
  ink: '#1f2933',
  muted: '#616e7c',
  rule: '#cbd2d9',
  faint: '#f0f4f8',
  accent: '#1d4e89',
  header: '#e4e9f0',
  allow: '#2f855a',
  deny: '#c53030',
  approval: '#d69e2e',
} as const;

/** Risk bands (and `unscored`), finding severities and readiness, coloured as a traffic light. */
export const LEVEL_COLOUR: Record<string, string> = {
  low: '#38a169',
  medium: '#d69e2e',
  high: '#dd6b20',
  critical: '#c53030',
  unscored: '#a0aec0',
  ready: '#38a169',
  partial: '#d69e2e',
  not_ready: '#c53030',
};

export const levelColour = (level: string) => LEVEL_COLOUR[level] ?? COLOUR.accent;
